"""``--redact``: drop usernames, command lines, hostnames and folders from a report, everywhere.

Redaction is a property of the document, made before any painter sees it: the results files and
the telemetry summary are redacted first (so the title, the summary and every table are built
from the aliases), then the finished report once more.

- Host fields (``hostname``, ``host``, ``node``...) are replaced by value: ``host-1``, ``host-2``
  ... (one alias per host, so a multi-host report still tells hosts apart), whatever the name's
  length; usernames become ``[user]``; a process keeps only its executable's base name;
  command-line fields are dropped; a ``path`` keeps only its file name.
- Every other string, file labels included, has the known hostnames (and their first label)
  and usernames replaced wherever they stand as a word, and ``/home/<name>`` cut.
- Names are matched after Unicode folding (compatibility decomposition, combining marks
  dropped, case folded): ``café-gpu-07`` written composed (NFC), decomposed (NFD), in capitals
  or as ``cafe-gpu-07`` is one host, and none of its forms is left.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from typing import overload

from gpuscope.schema.core import JsonObject, JsonTree

__all__ = ["redact_report", "Redaction", "HOST_KEYS", "USER_KEYS", "COMMAND_KEYS"]

HOST_KEYS = frozenset({"hostname", "host", "node", "nodename", "fqdn", "master_addr", "address"})
HOSTS_LIST_KEYS = frozenset({"hostnames", "hosts"})
USER_KEYS = frozenset({"user", "username", "owner", "login", "uid_name"})
COMMAND_KEYS = frozenset({"cmdline", "command", "command_line", "argv", "cwd", "environment", "env"})
PATH_KEYS = frozenset({"path"})
USER_PLACEHOLDER = "[user]"
COMMAND_PLACEHOLDER = "[redacted]"
#: Words too common to replace inside free text (a host so named is still replaced in its fields).
_GENERIC = frozenset(
    "root user admin nobody ubuntu debian localhost none null unknown [user] cpu gpu cuda host node "
    "a an as at be by do go if in is it me my no of ok on or so to up us vs we".split()
)
_HOME = re.compile(r"(/home/|/Users/|/users/|C:\\Users\\)[^/\\\s\"'<>]+")
_ALIAS = re.compile(r"host-\d+")


@lru_cache(maxsize=8192)
def _fold_char(char: str) -> str:
    """One character folded: compatibility decomposition, case folded, combining marks dropped
    (``É`` -> ``e``, ``ß`` -> ``ss``, ``ﬁ`` -> ``fi``, a lone combining accent -> ``""``)."""
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", char).casefold())
    return "".join(part for part in folded if not unicodedata.combining(part))


def _fold(text: str) -> str:
    """``text`` as names are compared for redaction (see :func:`_fold_char`)."""
    if text.isascii():
        return text.lower()
    return "".join(_fold_char(char) for char in text)


class Redaction:
    """The hosts and users of a set of documents and how each string of them is redacted."""

    def __init__(self) -> None:
        #: folded hostname -> alias
        self.hosts: dict[str, str] = {}
        #: folded names replaced inside free text, longest first, with what replaces them
        self._words: list[tuple[str, str]] = []
        self._users: set[str] = set()

    @classmethod
    def of(cls, documents: Iterable[JsonTree]) -> Redaction:
        """The redaction of ``documents`` (dicts and lists as parsed from JSON), this machine's
        hostname and user included."""
        redaction = cls()
        for document in documents:
            redaction._collect(document, None)
        local_host = _local_hostname()
        if local_host:
            redaction._add_host(local_host)
        local_user = _local_user()
        if local_user:
            redaction._users.add(local_user)
        words: dict[str, str] = {}
        for name, alias in redaction.hosts.items():
            for form in (name, name.split(".")[0]):
                if len(form) >= 2 and form not in _GENERIC:
                    words.setdefault(form, alias)
        for user in redaction._users:
            folded = _fold(user)
            if len(folded) >= 3 and folded not in _GENERIC:
                words.setdefault(folded, USER_PLACEHOLDER)
        redaction._words = sorted(words.items(), key=lambda item: -len(item[0]))
        return redaction

    def _add_host(self, name: str) -> None:
        folded = _fold(name.strip())
        if folded and not _ALIAS.fullmatch(folded) and folded not in self.hosts:
            self.hosts[folded] = f"host-{len(self.hosts) + 1}"

    def _collect(self, value: JsonTree, key: str | None) -> None:
        if isinstance(value, dict):
            for child_key, child in value.items():
                self._collect(child, str(child_key).lower())
        elif isinstance(value, list):
            for item in value:
                self._collect(item, key if key in HOSTS_LIST_KEYS else None)
        elif isinstance(value, str) and value:
            if key in HOST_KEYS or key in HOSTS_LIST_KEYS:
                self._add_host(value)
            elif key in USER_KEYS and value != USER_PLACEHOLDER:
                self._users.add(value)

    @overload
    def apply(self, value: JsonObject, key: str | None = None) -> JsonObject: ...

    @overload
    def apply(self, value: JsonTree, key: str | None = None) -> JsonTree: ...

    def apply(self, value: JsonTree, key: str | None = None) -> JsonTree:
        """A redacted copy of ``value`` (a JSON tree or a string; idempotent)."""
        if isinstance(value, dict):
            is_process = "pid" in value
            out: JsonObject = {}
            for child_key, child in value.items():
                lowered = str(child_key).lower()
                if lowered in COMMAND_KEYS:
                    out[child_key] = COMMAND_PLACEHOLDER if child is not None else None
                elif lowered in USER_KEYS:
                    out[child_key] = USER_PLACEHOLDER if child is not None else None
                elif is_process and lowered == "name" and isinstance(child, str):
                    out[child_key] = self.text(_process_name(child))
                elif lowered in PATH_KEYS and isinstance(child, str):
                    out[child_key] = self.text(re.split(r"[/\\]", child)[-1])
                else:
                    out[child_key] = self.apply(child, lowered)
            return out
        if isinstance(value, list):
            return [self.apply(item, key if key in HOSTS_LIST_KEYS else None) for item in value]
        if isinstance(value, str):
            if key in HOST_KEYS or key in HOSTS_LIST_KEYS:
                alias = self.hosts.get(_fold(value.strip()))
                if alias is not None:
                    return alias
            return self.text(value)
        return value

    def text(self, text: str) -> str:
        """Free text with home folders cut and every known name replaced where it stands as a
        word (``_``, ``-``, ``.``, ``/`` and ``:`` separate words; ``host-77`` is not ``host-7``)."""
        text = _HOME.sub(lambda match: match.group(1) + USER_PLACEHOLDER, text)
        if not self._words:
            return text
        folded, starts, ends = _folded(text)
        spans: list[tuple[int, int, str]] = []
        for name, replacement in self._words:
            position = folded.find(name)
            while position >= 0:
                end = position + len(name)
                before = folded[position - 1] if position else ""
                after = folded[end] if end < len(folded) else ""
                if not before.isalnum() and not after.isalnum():  # "" is not alphanumeric either
                    spans.append((starts[position], ends[end - 1], replacement))
                position = folded.find(name, position + 1)
        if not spans:
            return text
        out: list[str] = []
        cursor = 0
        for start, end, replacement in sorted(spans, key=lambda span: (span[0], -span[1])):
            if start < cursor:
                continue  # inside a longer name already replaced
            while end < len(text) and not _fold_char(text[end]):
                end += 1  # the combining marks of the last character
            out.append(text[cursor:start])
            out.append(replacement)
            cursor = end
        out.append(text[cursor:])
        return "".join(out)


def _folded(text: str) -> tuple[str, list[int], list[int]]:
    """``_fold(text)`` and, for each of its characters, where the original character that gave it
    starts and ends in ``text``."""
    if text.isascii():
        return text.lower(), list(range(len(text))), list(range(1, len(text) + 1))
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for index, char in enumerate(text):
        folded = _fold_char(char)
        parts.append(folded)
        starts.extend([index] * len(folded))
        ends.extend([index + 1] * len(folded))
    return "".join(parts), starts, ends


def redact_report(report: JsonObject) -> JsonObject:
    """A redacted copy of ``report`` (idempotent), with ``redacted`` set true."""
    out = Redaction.of([report]).apply(report)
    out["redacted"] = True
    return out


def _local_hostname() -> str | None:
    try:
        return socket.gethostname() or None
    except OSError:
        return None


def _local_user() -> str | None:
    try:
        return getpass.getuser() or None
    except Exception:  # noqa: BLE001 - getpass raises various errors without a passwd entry
        return os.environ.get("USER") or None


def _process_name(name: str) -> str:
    """The executable's base name, without arguments or folders."""
    first = name.strip().split()[0] if name.strip() else ""
    return re.split(r"[/\\]", first)[-1] or COMMAND_PLACEHOLDER
