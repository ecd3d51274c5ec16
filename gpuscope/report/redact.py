"""``--redact``: drop usernames, command lines and hostnames from a report, everywhere.

Hostnames become ``host-1``, ``host-2`` ... (the same name maps to the same alias, so a multi-host
report still tells hosts apart); usernames become ``[user]``; a process keeps only the base name
of its executable; command-line fields are dropped. Every other string in the document, the
embedded results included, has known hostnames and usernames replaced and ``/home/<name>``
paths cut.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from typing import Any

__all__ = ["redact_report", "HOST_KEYS", "USER_KEYS", "COMMAND_KEYS"]

HOST_KEYS = frozenset({"hostname", "host", "node", "nodename", "fqdn", "master_addr", "address"})
HOSTS_LIST_KEYS = frozenset({"hostnames", "hosts"})
USER_KEYS = frozenset({"user", "username", "owner", "login", "uid_name"})
COMMAND_KEYS = frozenset({"cmdline", "command", "command_line", "argv", "cwd", "environment", "env"})
USER_PLACEHOLDER = "[user]"
COMMAND_PLACEHOLDER = "[redacted]"
#: Names too generic to replace inside free text (they stay replaced in user fields).
_GENERIC = frozenset(
    "root user admin nobody ubuntu debian localhost none null unknown [user] cpu gpu cuda host node".split()
)
_HOME = re.compile(r"(/home/|/Users/|/users/|C:\\Users\\)[^/\\\s\"'<>]+")


def redact_report(report: dict[str, Any]) -> dict[str, Any]:
    """A redacted copy of ``report`` (idempotent), with ``redacted`` set true."""
    hosts: dict[str, str] = {}
    users: set[str] = set()
    _collect(report, hosts, users, None)
    local_host = _local_hostname()
    if local_host and local_host not in hosts and not re.fullmatch(r"host-\d+", local_host):
        hosts[local_host] = f"host-{len(hosts) + 1}"
    local_user = _local_user()
    if local_user:
        users.add(local_user)
    replacements: list[tuple[re.Pattern[str], str]] = []
    for name, alias in sorted(hosts.items(), key=lambda item: -len(item[0])):
        if len(name) >= 3 and name.lower() not in _GENERIC:
            replacements.append((_name_pattern(name), alias))
            short = name.split(".")[0]
            if short != name and len(short) >= 3 and short.lower() not in _GENERIC:
                replacements.append((_name_pattern(short), alias))
    for name in sorted(users, key=len, reverse=True):
        if len(name) >= 3 and name.lower() not in _GENERIC:
            replacements.append((_name_pattern(name), USER_PLACEHOLDER))
    out: dict[str, Any] = _rewrite(report, hosts, replacements, None)
    out["redacted"] = True
    return out


def _name_pattern(name: str) -> re.Pattern[str]:
    """``name`` in any letter case, wherever it is not part of a longer word or number: inside
    identifiers too, since ``_``, ``-``, ``.``, ``/`` and ``:`` separate (``bench_zz-secret-77``,
    ``ZZ-SECRET-77.log``), but not ``zz-secret-777``."""
    return re.compile(rf"(?<![^\W_]){re.escape(name)}(?![^\W_])", re.IGNORECASE)


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


def _is_alias(value: str) -> bool:
    return bool(re.fullmatch(r"host-\d+", value))


def _collect(value: Any, hosts: dict[str, str], users: set[str], key: str | None) -> None:
    if isinstance(value, dict):
        for child_key, child in value.items():
            _collect(child, hosts, users, str(child_key).lower())
    elif isinstance(value, list):
        for item in value:
            _collect(item, hosts, users, key if key in HOSTS_LIST_KEYS else None)
    elif isinstance(value, str) and value:
        if key in HOST_KEYS or key in HOSTS_LIST_KEYS:
            if not _is_alias(value) and value.lower() not in {known.lower() for known in hosts}:
                hosts[value] = f"host-{len(hosts) + 1}"
        elif key in USER_KEYS and value != USER_PLACEHOLDER:
            users.add(value)


def _process_name(name: str) -> str:
    """The executable's base name, without arguments or folders."""
    first = name.strip().split()[0] if name.strip() else ""
    return re.split(r"[/\\]", first)[-1] or COMMAND_PLACEHOLDER


def _rewrite(
    value: Any, hosts: dict[str, str], replacements: list[tuple[re.Pattern[str], str]], key: str | None
) -> Any:
    if isinstance(value, dict):
        is_process = "pid" in value
        out: dict[str, Any] = {}
        for child_key, child in value.items():
            lowered = str(child_key).lower()
            if lowered in COMMAND_KEYS:
                out[child_key] = COMMAND_PLACEHOLDER if child is not None else None
            elif lowered in USER_KEYS:
                out[child_key] = USER_PLACEHOLDER if child is not None else None
            elif is_process and lowered == "name" and isinstance(child, str):
                out[child_key] = _scrub(_process_name(child), replacements)
            else:
                out[child_key] = _rewrite(child, hosts, replacements, lowered)
        return out
    if isinstance(value, list):
        return [_rewrite(item, hosts, replacements, key if key in HOSTS_LIST_KEYS else None) for item in value]
    if isinstance(value, str):
        if key in HOST_KEYS or key in HOSTS_LIST_KEYS:
            for name, alias in hosts.items():
                if value.lower() == name.lower():
                    return alias
        return _scrub(value, replacements)
    return value


def _scrub(text: str, replacements: list[tuple[re.Pattern[str], str]]) -> str:
    text = _HOME.sub(lambda m: m.group(1) + USER_PLACEHOLDER, text)
    for pattern, alias in replacements:
        text = pattern.sub(alias, text)
    return text
