"""The probe results file: versioned JSON written by ``gpuscope probe`` and ``gpuscope measure``,
read by ``roofline``, ``report``, ``compare`` and the TUI. Documented in ``docs/results-schema.md``.

Top level::

    {
      "schema": "gpuscope.results", "schema_version": 1,
      "gpuscope_version": "0.1.0", "created": <epoch s>,
      "partial": false, "partial_reason": null,
      "suite": {"name": "quick", "path": "..."} | null,
      "system": {"hostname", "cpu_model", "logical_cores", "physical_cores", "os", "python",
                 "torch", "cuda", "driver", "blas", ...},
      "devices": [{"device": "cpu" | "cuda:0", "type": "cpu" | "gpu", "name", "host", "rank", ...}],
      "ceilings": [{"device", "kind", "name", "value", "unit", "measurement_id", "host", "rank", ...}],
      "measurements": [{"id", "kind", "name", "device", "parameters", "flops", "bytes", "counting_rule",
                        "samples_s", "statistic", "time_s", "flop_per_s", "bytes_per_s",
                        "validation_error", "status", "error", "versions",
                        "telemetry_before", "telemetry_after", "telemetry_during", ...}],
      "workloads": [{"name", "device", "flops", "bytes", "bytes_rule", "time_s", "time_p10_s",
                     "time_p90_s", "n", "flop_per_s", "intensity_flop_per_byte", "source", ...}]
    }
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from gpuscope.errors import BadInputError

__all__ = [
    "RESULTS_SCHEMA",
    "RESULTS_SCHEMA_VERSION",
    "CEILING_KINDS",
    "CEILING_UNITS",
    "new_results",
    "load_results",
    "read_json_file",
    "validate_results",
    "write_json_atomic",
    "write_text_atomic",
]

RESULTS_SCHEMA = "gpuscope.results"
RESULTS_SCHEMA_VERSION = 1
CEILING_KINDS = ("compute", "memory", "transfer", "collective")
CEILING_UNITS = ("FLOP/s", "B/s")

#: Refuse to parse results files larger than this: a results file is kilobytes to a few MB.
MAX_RESULTS_BYTES = 256 * 1024 * 1024


def new_results(system: dict[str, Any] | None = None, suite: dict[str, Any] | None = None) -> dict[str, Any]:
    """An empty results document of the current schema version."""
    import time

    from gpuscope import __version__

    return {
        "schema": RESULTS_SCHEMA,
        "schema_version": RESULTS_SCHEMA_VERSION,
        "gpuscope_version": __version__,
        "created": time.time(),
        "partial": False,
        "partial_reason": None,
        "suite": suite,
        "system": system or {},
        "devices": [],
        "ceilings": [],
        "measurements": [],
        "workloads": [],
    }


#: Numbers a results file may hold for ceilings and workloads: zero (where allowed) or a
#: magnitude in [MIN_MAGNITUDE, MAX_MAGNITUDE], so every rate, intensity and chart position
#: derived from them stays a finite float (1e30 FLOP/s is far beyond any machine).
MIN_MAGNITUDE = 1e-15
MAX_MAGNITUDE = 1e30


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _in_range(value: Any, allow_zero: bool) -> bool:
    if not _is_number(value):
        return False
    if value == 0:
        return allow_zero
    return MIN_MAGNITUDE <= value <= MAX_MAGNITUDE


def validate_results(data: Any, source: str) -> dict[str, Any]:
    """Check ``data`` is a results document; raise :class:`BadInputError` naming ``source`` and
    the first problem found. Returns ``data`` with optional lists defaulted."""
    if not isinstance(data, dict):
        raise BadInputError(f"{source}: not a gpuscope results file (top level is {type(data).__name__}, expected an object)")
    if data.get("schema") != RESULTS_SCHEMA:
        raise BadInputError(f"{source}: not a gpuscope results file (field 'schema' is {data.get('schema')!r}, expected {RESULTS_SCHEMA!r})")
    version = data.get("schema_version")
    if version != RESULTS_SCHEMA_VERSION or isinstance(version, bool):
        raise BadInputError(
            f"{source}: results schema_version {version!r} is not supported (this gpuscope reads version {RESULTS_SCHEMA_VERSION})"
        )
    for key in ("devices", "ceilings", "measurements", "workloads"):
        value = data.setdefault(key, [])
        if not isinstance(value, list):
            raise BadInputError(f"{source}: field '{key}' must be a list, got {type(value).__name__}")
        for position, item in enumerate(value):
            if not isinstance(item, dict):
                raise BadInputError(f"{source}: {key}[{position}] must be an object, got {type(item).__name__}")
    for position, ceiling in enumerate(data["ceilings"]):
        where = f"{source}: ceilings[{position}]"
        for key in ("device", "kind", "name", "unit"):
            if not isinstance(ceiling.get(key), str) or not ceiling[key]:
                raise BadInputError(f"{where}: field '{key}' must be a non-empty string")
        if ceiling["kind"] not in CEILING_KINDS:
            raise BadInputError(f"{where}: field 'kind' is {ceiling['kind']!r}, expected one of {', '.join(CEILING_KINDS)}")
        if ceiling["unit"] not in CEILING_UNITS:
            raise BadInputError(f"{where}: field 'unit' is {ceiling['unit']!r}, expected FLOP/s or B/s")
        if not _in_range(ceiling.get("value"), allow_zero=False):
            raise BadInputError(
                f"{where}: field 'value' must be a positive number between {MIN_MAGNITUDE:g} and {MAX_MAGNITUDE:g}, "
                f"got {ceiling.get('value')!r}"
            )
    for position, workload in enumerate(data["workloads"]):
        where = f"{source}: workloads[{position}]"
        if not isinstance(workload.get("name"), str):
            raise BadInputError(f"{where}: field 'name' must be a string")
        if not isinstance(workload.get("device", ""), str):
            raise BadInputError(f"{where}: field 'device' must be a string")
        for key in ("flops", "bytes", "time_s"):
            if not _in_range(workload.get(key), allow_zero=True):
                raise BadInputError(
                    f"{where}: field '{key}' must be 0 or a positive number between {MIN_MAGNITUDE:g} and {MAX_MAGNITUDE:g}, "
                    f"got {workload.get(key)!r}"
                )
    for position, measurement in enumerate(data["measurements"]):
        identifier = measurement.get("id")
        if identifier is not None and (not isinstance(identifier, (str, int)) or isinstance(identifier, bool)):
            raise BadInputError(f"{source}: measurements[{position}]: field 'id' must be a string")
        if not isinstance(measurement.get("device", ""), str):
            raise BadInputError(f"{source}: measurements[{position}]: field 'device' must be a string")
    if not isinstance(data.get("system", {}), dict):
        raise BadInputError(f"{source}: field 'system' must be an object")
    return data


def read_json_file(path: str | os.PathLike[str], expected: str = "a results JSON file") -> Any:
    """Parse a JSON file. Raises :class:`BadInputError` with one line naming the file and the
    problem (missing, empty, too large, not UTF-8, nested too deeply, truncated, not JSON)."""
    source = str(path)
    try:
        size = os.path.getsize(path)
        if size > MAX_RESULTS_BYTES:
            raise BadInputError(f"{source}: {size} bytes is too large for {expected} (limit {MAX_RESULTS_BYTES})")
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise BadInputError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise BadInputError(f"{source}: is a directory, expected {expected}") from None
    except PermissionError:
        raise BadInputError(f"{source}: permission denied") from None
    except OSError as exc:
        raise BadInputError(f"{source}: cannot read ({exc.strerror or exc})") from None
    if not raw.strip():
        raise BadInputError(f"{source}: file is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{source}: not UTF-8 text (byte {exc.start}); is this {expected}?") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise BadInputError(f"{source}: JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        hint = " (truncated?)" if exc.pos >= len(text.rstrip()) - 1 else ""
        raise BadInputError(f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{hint}") from None
    except ValueError as exc:  # e.g. an integer longer than Python's 4300-digit conversion limit
        raise BadInputError(f"{source}: invalid JSON: {exc}") from None


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a results file. Raises :class:`BadInputError` with one line naming the
    file and the problem (missing, empty, truncated, not JSON, wrong schema or version)."""
    return validate_results(read_json_file(path), str(path))


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 text to ``path`` through a temporary file in the same folder and a rename, so
    a reader never sees a half-written file and a crash leaves the previous file intact."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        # mkstemp makes the file 0600; give it the permissions a plain open() would have.
        os.fchmod(descriptor, 0o666 & ~_umask())
        with os.fdopen(descriptor, "w", encoding="utf-8", errors="replace", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def write_json_atomic(path: str | os.PathLike[str], data: Any, indent: int | None = 2) -> None:
    """Write ``data`` as JSON atomically (see :func:`write_text_atomic`); NaN and infinity become null."""
    write_text_atomic(path, json.dumps(_finite(data), indent=indent, allow_nan=False, default=_json_default) + "\n")


def _umask() -> int:
    """The process umask, read without changing it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _finite(value: Any) -> Any:
    """NaN and infinity are not JSON: store them as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _json_default(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
