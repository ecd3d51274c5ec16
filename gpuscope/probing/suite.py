"""Probe suites: TOML files listing what to measure (format in docs/results-schema.md, "Suites";
types in :mod:`gpuscope.schema.suites`).

``load_suite(name_or_path)`` accepts a shipped suite name (``quick``, ``full``, ``transformer``:
files in :func:`gpuscope.resources.suites_dir`) or a path. Any problem raises
:class:`gpuscope.errors.BadInputError` with one line naming the file, the line and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from gpuscope.errors import BadInputError
from gpuscope.resources import suites_dir
from gpuscope.schema.core import problem_of
from gpuscope.schema.files import read_bytes
from gpuscope.schema.kinds import KIND_NAMES, SUITE, sniff_kind
from gpuscope.schema.results import SuiteRef
from gpuscope.schema.suites import PROBE_KINDS, AnyProbe, SuiteFile, SuiteSettings, parse_size
from gpuscope.tomlfile import TomlSyntaxError, parse_toml
from gpuscope.workdir import check_path

__all__ = [
    "Suite",
    "SuiteSettings",
    "ProbeSpec",
    "load_suite",
    "parse_suite",
    "parse_size",
    "shipped_suites",
    "PROBE_KINDS",
]


@dataclass
class ProbeSpec:
    """One ``[[probe]]`` table, checked and normalised. ``line`` is its header's line."""

    kind: str
    index: int
    line: int
    options: AnyProbe
    devices: tuple[str, ...] = ("cpu", "cuda")
    label: str = ""

    def runs_on(self, device_type: str) -> bool:
        """``device_type`` is ``cpu`` or ``gpu``."""
        return ("cuda" if device_type == "gpu" else "cpu") in self.devices


@dataclass
class Suite:
    name: str
    path: str
    description: str
    settings: SuiteSettings
    probes: list[ProbeSpec] = field(default_factory=list)

    def ref(self) -> SuiteRef:
        """The ``suite`` object of a results file."""
        return SuiteRef(name=self.name, path=self.path, description=self.description)


def shipped_suites() -> dict[str, Path]:
    """Shipped suite name -> file."""
    folder = suites_dir()
    return {path.stem: path for path in sorted(folder.glob("*.toml"))} if folder.is_dir() else {}


def load_suite(name_or_path: str) -> Suite:
    """A shipped suite by name, or a suite file by path."""
    shipped = shipped_suites()
    if name_or_path in shipped and not Path(name_or_path).exists():
        path = shipped[name_or_path]
    else:
        check_path(name_or_path)  # a relative file once the working directory is gone: one line, exit 4
        path = Path(name_or_path)
        if not path.exists():
            names = ", ".join(shipped) or "none"
            raise BadInputError(f"{name_or_path}: no such suite file or shipped suite (shipped: {names})")
    raw = read_bytes(path, "a suite TOML file", "suite")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInputError(f"{path}: not UTF-8 text; expected a suite TOML file") from None
    try:
        return parse_suite(text, str(path))
    except BadInputError:
        kind = sniff_kind(raw)
        if kind is not None and kind != SUITE:
            raise BadInputError(f"{path} is {KIND_NAMES[kind]}; --suite takes {KIND_NAMES[SUITE]}") from None
        raise


class _Locator:
    """Finds the line of a key in the raw TOML text (tomllib keeps no positions)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.probe_headers = [i + 1 for i, line in enumerate(self.lines) if re.match(r"^\s*\[\[\s*probe\s*\]\]", line)]
        self.suite_header = next(
            (i + 1 for i, line in enumerate(self.lines) if re.match(r"^\s*\[\s*suite\s*\]", line)), None
        )

    def _key_line(self, start: int, key: str) -> int:
        pattern = re.compile(rf"^\s*(\"?){re.escape(key)}\1\s*=")
        for number in range(start + 1, len(self.lines) + 1):
            line = self.lines[number - 1]
            if re.match(r"^\s*\[", line):
                break
            if pattern.match(line):
                return number
        return start

    def probe(self, index: int, key: str | None = None) -> int:
        header = self.probe_headers[index] if index < len(self.probe_headers) else 1
        return self._key_line(header, key) if key else header

    def suite(self, key: str | None = None) -> int:
        if self.suite_header is None:
            return 1
        return self._key_line(self.suite_header, key) if key else self.suite_header

    def line_of(self, problem: str) -> int:
        """The line a msgspec problem (``... - at `$.probe[1].sizes```) points at."""
        match = re.search(r"at `\$(?:\.(suite|probe))?(?:\[(\d+)\])?(?:\.(\w+))?", problem)
        named = re.search(r"field `(\w+)`", problem)
        section, index, key = match.groups() if match else (None, None, None)
        key = key or (named.group(1) if named else None)
        if section == "suite":
            return self.suite(key)
        if section == "probe" and index is not None:
            return self.probe(int(index), key)
        if key:
            return next(
                (i + 1 for i, line in enumerate(self.lines) if re.match(rf"^\s*\[*\s*{re.escape(key)}\b", line)), 1
            )
        return 1


def parse_suite(text: str, source: str) -> Suite:
    """Parse and check suite ``text`` (:class:`gpuscope.schema.suites.SuiteFile`); ``source``
    names it in errors: ``<file>:<line>: <problem> - at `$.probe[1].sizes```."""
    try:
        data = parse_toml(text)
    except TomlSyntaxError as exc:
        where = f"{source}:{exc.line}" if exc.line else source
        raise BadInputError(f"{where}: invalid TOML: {exc.message}") from None
    locate = _Locator(text)
    try:
        suite = msgspec.convert(data, SuiteFile, strict=True)
    except msgspec.ValidationError as exc:
        problem = problem_of(exc)
        raise BadInputError(f"{source}:{locate.line_of(problem)}: {problem}") from None
    probes = [
        ProbeSpec(
            kind=str(options.__struct_config__.tag),
            index=index,
            line=locate.probe(index),
            options=options,
            devices=tuple(options.devices),
            label=options.label,
        )
        for index, options in enumerate(suite.probe)
    ]
    table = suite.suite
    return Suite(
        name=table.name or Path(source).stem,
        path=source,
        description=table.description,
        settings=table.settings(),
        probes=probes,
    )
