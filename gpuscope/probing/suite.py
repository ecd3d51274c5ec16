"""Probe suites: TOML files listing what to measure (format in docs/results-schema.md, "Suites").

``load_suite(name_or_path)`` accepts a shipped suite name (``quick``, ``full``, ``transformer``:
files in :func:`gpuscope.resources.suites_dir`) or a path. Any problem raises
:class:`gpuscope.errors.BadInputError` with one line naming the file, the line and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuscope.errors import BadInputError
from gpuscope.tomlfile import TomlSyntaxError, parse_toml


__all__ = ["Suite", "SuiteSettings", "ProbeSpec", "load_suite", "parse_suite", "parse_size", "shipped_suites", "PROBE_KINDS"]

PROBE_KINDS = ("matmul", "memory", "transfer", "collective", "transformer")
_DEVICE_TYPES = ("cpu", "cuda")
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)?\s*$")
_SIZE_SCALE = {None: 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


@dataclass(frozen=True)
class SuiteSettings:
    """Timing settings of a suite (seconds; ``samples`` is N)."""

    samples: int = 5
    target_sample_s: float = 0.02
    warmup_max_s: float = 2.0
    workload_samples: int = 15
    workload_target_sample_s: float = 0.02
    max_call_s: float = 1.0
    contention_retries: int = 2  # CPU: re-time a measurement while other processes took the cores
    contention_threshold_percent: float = 10.0
    contention_retry_budget_s: float = 30.0  # total seconds a run may spend on such retries


@dataclass
class ProbeSpec:
    """One ``[[probe]]`` table, checked and normalised. ``line`` is its header's line."""

    kind: str
    index: int
    line: int
    options: dict[str, Any]
    devices: tuple[str, ...] = _DEVICE_TYPES
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

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "description": self.description}


def shipped_suites() -> dict[str, Path]:
    """Shipped suite name -> file."""
    from gpuscope.resources import suites_dir

    folder = suites_dir()
    return {path.stem: path for path in sorted(folder.glob("*.toml"))} if folder.is_dir() else {}


def load_suite(name_or_path: str) -> Suite:
    """A shipped suite by name, or a suite file by path."""
    shipped = shipped_suites()
    if name_or_path in shipped and not Path(name_or_path).exists():
        path = shipped[name_or_path]
    else:
        path = Path(name_or_path)
        if not path.exists():
            names = ", ".join(shipped) or "none"
            raise BadInputError(f"{name_or_path}: no such suite file or shipped suite (shipped: {names})")
    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise BadInputError(f"{path}: is a directory, expected a suite TOML file") from None
    except UnicodeDecodeError:
        raise BadInputError(f"{path}: not UTF-8 text; expected a suite TOML file") from None
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return parse_suite(text, str(path))


def parse_size(value: Any) -> int | None:
    """``4096``, ``"64KiB"``, ``"1.5 GB"`` -> bytes; None when not a size."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match:
            return int(float(match.group(1)) * _SIZE_SCALE[match.group(2)])
    return None


class _Locator:
    """Finds the line of a key in the raw TOML text (tomllib keeps no positions)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.probe_headers = [i + 1 for i, line in enumerate(self.lines) if re.match(r"^\s*\[\[\s*probe\s*\]\]", line)]
        self.suite_header = next((i + 1 for i, line in enumerate(self.lines) if re.match(r"^\s*\[\s*suite\s*\]", line)), None)

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


def parse_suite(text: str, source: str) -> Suite:
    """Parse and check suite ``text``; ``source`` names it in errors."""
    try:
        data = parse_toml(text)
    except TomlSyntaxError as exc:
        where = f"{source}:{exc.line}" if exc.line else source
        raise BadInputError(f"{where}: invalid TOML: {exc.message}") from None
    locate = _Locator(text)

    def fail(line: int, where: str, message: str) -> BadInputError:
        return BadInputError(f"{source}:{line}: {where}: {message}")

    unknown_top = sorted(set(data) - {"suite", "probe"})
    if unknown_top:
        key = unknown_top[0]
        line = next((i + 1 for i, l in enumerate(locate.lines) if re.match(rf"^\s*\[?\s*{re.escape(key)}\b", l)), 1)
        raise fail(line, f"field '{key}'", "unknown top-level field (expected [suite] and [[probe]] tables)")
    suite_table = data.get("suite", {})
    if not isinstance(suite_table, dict):
        raise fail(locate.suite(), "field 'suite'", "must be a table [suite]")
    name = suite_table.get("name", Path(source).stem)
    if not isinstance(name, str) or not name:
        raise fail(locate.suite("name"), "suite field 'name'", "must be a non-empty string")
    description = suite_table.get("description", "")
    if not isinstance(description, str):
        raise fail(locate.suite("description"), "suite field 'description'", "must be a string")
    settings_kwargs: dict[str, Any] = {}
    for key, value in suite_table.items():
        if key in ("name", "description"):
            continue
        if key not in SuiteSettings.__dataclass_fields__:
            allowed = ", ".join(["name", "description", *SuiteSettings.__dataclass_fields__])
            raise fail(locate.suite(key), f"suite field '{key}'", f"unknown field (allowed: {allowed})")
        default = SuiteSettings.__dataclass_fields__[key].default
        if isinstance(default, int) and not isinstance(default, bool):
            lowest = 0 if key == "contention_retries" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
                kind = "a non-negative" if lowest == 0 else "a positive"
                raise fail(locate.suite(key), f"suite field '{key}'", f"must be {kind} integer, got {value!r}")
        elif not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            unit = "seconds" if key.endswith("_s") else "percent"
            raise fail(locate.suite(key), f"suite field '{key}'", f"must be a positive number of {unit}, got {value!r}")
        settings_kwargs[key] = value
    probes_data = data.get("probe", [])
    if not isinstance(probes_data, list):
        raise fail(1, "field 'probe'", "must be an array of tables [[probe]]")
    if not probes_data:
        raise fail(locate.suite(), "field 'probe'", "the suite has no [[probe]] tables")
    probes = [_check_probe(index, table, locate, fail) for index, table in enumerate(probes_data)]
    return Suite(name=name, path=source, description=description, settings=SuiteSettings(**settings_kwargs), probes=probes)


_COMMON = {"kind", "devices", "label"}
_ALLOWED = {
    "matmul": _COMMON | {"dtypes", "shapes", "batch", "transpose", "role", "libraries"},
    "memory": _COMMON | {"kernels", "working_sets", "dtype", "dram_array_bytes", "samples"},
    "transfer": _COMMON | {"directions", "host_memory", "sizes"},
    "collective": _COMMON | {"ops", "sizes", "world_size", "samples"},
    "transformer": _COMMON | {"hidden", "ffn", "heads", "kv_heads", "tokens", "context", "dtypes", "attention", "model"},
}


def _check_probe(index: int, table: Any, locate: _Locator, fail: Any) -> ProbeSpec:
    from gpuscope.probing.collective import OPS
    from gpuscope.probing.matmul import MATMUL_DTYPES
    from gpuscope.probing.memory import KERNELS
    from gpuscope.probing.transfer import DIRECTIONS

    def error(key: str | None, message: str) -> BadInputError:
        where = f"probe[{index}]" + (f" field '{key}'" if key else "")
        return fail(locate.probe(index, key), where, message)

    if not isinstance(table, dict):
        raise error(None, "must be a table")
    kind = table.get("kind")
    if kind not in PROBE_KINDS:
        raise error("kind", f"is {kind!r}, expected one of {', '.join(PROBE_KINDS)}")
    for key in table:
        if key not in _ALLOWED[kind]:
            raise error(key, f"unknown field for a {kind} probe (allowed: {', '.join(sorted(_ALLOWED[kind]))})")

    def str_list(key: str, allowed: tuple[str, ...] | list[str] | None, default: list[str] | None) -> list[str]:
        value = table.get(key, default)
        if value is None:
            raise error(key, "is required")
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise error(key, "must be a non-empty list of strings")
        if allowed is not None:
            for item in value:
                if item not in allowed:
                    raise error(key, f"unknown value {item!r} (expected one of {', '.join(allowed)})")
        return value

    def positive_int(key: str, default: int | None) -> int | None:
        value = table.get(key, default)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise error(key, f"must be a positive integer, got {value!r}")
        return value

    def size_list(key: str, default: list[Any] | None) -> list[int]:
        value = table.get(key, default)
        if not isinstance(value, list) or not value:
            raise error(key, "must be a non-empty list of sizes (bytes, or strings like \"64KiB\", \"1MiB\", \"1GB\")")
        sizes = []
        for item in value:
            size = parse_size(item)
            if size is None:
                raise error(key, f"{item!r} is not a size (bytes, or a string like \"64KiB\", \"1MiB\", \"1GB\")")
            sizes.append(size)
        return sizes

    devices = tuple(str_list("devices", _DEVICE_TYPES, list(_DEVICE_TYPES)))
    label = table.get("label", "")
    if not isinstance(label, str):
        raise error("label", "must be a string")
    options: dict[str, Any] = {}
    if kind == "matmul":
        options["dtypes"] = str_list("dtypes", MATMUL_DTYPES, None)
        options["role"] = table.get("role", "ceiling")
        if options["role"] not in ("ceiling", "workload"):
            raise error("role", f"is {options['role']!r}, expected ceiling or workload")
        options["libraries"] = str_list("libraries", ("torch", "numpy"), ["torch", "numpy"])
        batch = positive_int("batch", 1)
        transpose = table.get("transpose", "nn")
        if transpose not in ("nn", "nt", "tn", "tt"):
            raise error("transpose", f"is {transpose!r}, expected nn, nt, tn or tt")
        shapes = table.get("shapes")
        if not isinstance(shapes, list) or not shapes:
            raise error("shapes", "must be a non-empty list of [M, N, K] (or [batch, M, N, K], or {m, n, k, batch, transpose, label} tables)")
        parsed = []
        for shape in shapes:
            parsed.append(_shape(shape, batch or 1, transpose, error))
        options["shapes"] = parsed
    elif kind == "memory":
        options["kernels"] = str_list("kernels", tuple(KERNELS), list(KERNELS))
        working_sets = table.get("working_sets", "auto")
        if isinstance(working_sets, str) and working_sets in ("auto", "sweep"):
            options["working_sets"] = working_sets
        elif isinstance(working_sets, list):
            options["working_sets"] = size_list("working_sets", None)
        else:
            raise error("working_sets", f"is {working_sets!r}, expected \"auto\", \"sweep\" or a list of sizes")
        dtype = table.get("dtype")
        if dtype is not None and dtype not in ("fp64", "fp32", "bf16", "fp16"):
            raise error("dtype", f"is {dtype!r}, expected fp64, fp32, bf16 or fp16")
        options["dtype"] = dtype
        dram = table.get("dram_array_bytes")
        options["dram_array_bytes"] = None if dram is None else parse_size(dram)
        options["samples"] = positive_int("samples", None)  # this probe's N, instead of the suite's
        if dram is not None and options["dram_array_bytes"] is None:
            raise error("dram_array_bytes", f"{dram!r} is not a size")
    elif kind == "transfer":
        options["directions"] = str_list("directions", DIRECTIONS, list(DIRECTIONS))
        options["host_memory"] = str_list("host_memory", ("pinned", "pageable"), ["pinned", "pageable"])
        options["sizes"] = size_list("sizes", ["1MiB", "16MiB", "256MiB"])
    elif kind == "collective":
        options["ops"] = str_list("ops", OPS, list(OPS))
        options["sizes"] = size_list("sizes", ["64KiB", "4MiB", "64MiB"])
        options["world_size"] = positive_int("world_size", None)
        options["samples"] = positive_int("samples", None)
    elif kind == "transformer":
        for key, default in (("hidden", 4096), ("ffn", 14336), ("heads", 32), ("kv_heads", 8), ("context", 2048)):
            options[key] = positive_int(key, default)
        if options["hidden"] % options["heads"]:
            raise error("heads", f"hidden {options['hidden']} is not divisible by heads {options['heads']}")
        if options["heads"] % options["kv_heads"]:
            raise error("kv_heads", f"heads {options['heads']} is not divisible by kv_heads {options['kv_heads']}")
        tokens = table.get("tokens", [1, 2048])
        if not isinstance(tokens, list) or not tokens or not all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in tokens):
            raise error("tokens", "must be a non-empty list of positive integers (tokens per forward pass)")
        options["tokens"] = tokens
        options["dtypes"] = str_list("dtypes", MATMUL_DTYPES, ["bf16"])
        attention = table.get("attention", True)
        if not isinstance(attention, bool):
            raise error("attention", "must be true or false")
        options["attention"] = attention
        model = table.get("model", "")
        if not isinstance(model, str):
            raise error("model", "must be a string")
        options["model"] = model
    return ProbeSpec(kind=kind, index=index, line=locate.probe(index), options=options, devices=devices, label=label)


def _shape(value: Any, batch: int, transpose: str, error: Any) -> Any:
    from gpuscope.probing.matmul import MatmulShape

    def dims_ok(dims: list[Any]) -> bool:
        return all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)

    if isinstance(value, list) and len(value) in (3, 4) and dims_ok(value):
        if len(value) == 4:
            return MatmulShape(m=value[1], n=value[2], k=value[3], batch=value[0], transpose=transpose)
        return MatmulShape(m=value[0], n=value[1], k=value[2], batch=batch, transpose=transpose)
    if isinstance(value, dict):
        unknown = set(value) - {"m", "n", "k", "batch", "transpose", "label"}
        if unknown:
            raise error("shapes", f"unknown key {sorted(unknown)[0]!r} in a shape table (allowed: m, n, k, batch, transpose, label)")
        dims = [value.get("m"), value.get("n"), value.get("k"), value.get("batch", batch)]
        if not dims_ok(dims):
            raise error("shapes", f"shape {value!r} needs positive integers m, n, k (and batch)")
        t = value.get("transpose", transpose)
        if t not in ("nn", "nt", "tn", "tt"):
            raise error("shapes", f"transpose {t!r} in {value!r}, expected nn, nt, tn or tt")
        label = value.get("label", "")
        return MatmulShape(m=dims[0], n=dims[1], k=dims[2], batch=dims[3], transpose=t, label=str(label))
    raise error("shapes", f"{value!r} is not a shape: use [M, N, K], [batch, M, N, K] or {{m=, n=, k=}}")
