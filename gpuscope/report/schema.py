"""The report document's schema (``docs/report-schema.md``), checked in full when a report.json is
read back (``gpuscope report --from``/``--probes report.json``, ``gpuscope compare``).

The renderers (``tables``, ``markdown``, ``html``, ``charts``) trust the document: every field they
read is checked here, once, so a corrupt or hand-edited report ends in one
:class:`~gpuscope.errors.BadInputError` line naming the file and the field path
(``rep.json: roofline.points[1] must be an object, got str``) instead of a traceback.

Field kinds:

- *text*: a JSON scalar (string, number, true/false) or null, shown as text and usable as a key;
- *any*: free text copied verbatim from a results file (shown with ``str()``), any JSON value;
- *number*: null, 0 or a finite number of magnitude in [:data:`MIN_MAGNITUDE`, :data:`MAX_MAGNITUDE`]
  (numbers derived from results numbers, each in ``gpuscope.results``' narrower range, stay inside);
- roof values and telemetry chart points use the results files' own range, so every chart
  limit computed from them stays a finite, non-zero float.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gpuscope.errors import BadInputError
from gpuscope.results import MAX_MAGNITUDE as RESULTS_MAX_MAGNITUDE
from gpuscope.results import MIN_MAGNITUDE as RESULTS_MIN_MAGNITUDE
from gpuscope.results import validate_results

__all__ = ["check_report_document", "MIN_MAGNITUDE", "MAX_MAGNITUDE", "MAX_PANELS", "MAX_POINTS_PER_LINE"]

#: Report numbers: 0 or a magnitude in this range (products and quotients of a few results numbers).
MIN_MAGNITUDE = 1e-100
MAX_MAGNITUDE = 1e100
#: Telemetry chart limits: panels per chart, points per line (the writer keeps at most 1200).
MAX_PANELS = 64
MAX_POINTS_PER_LINE = 1200
#: Line styles a telemetry chart line may name (matplotlib's).
LINE_STYLES = ("-", "--", ":", "-.", "solid", "dashed", "dotted", "dashdot")


class _Invalid(Exception):
    """A schema violation at ``path``; turned into one BadInputError line by the caller."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(path, problem)
        self.path = path
        self.problem = problem


Check = Callable[[Any, str], None]


def _got(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if not key.isidentifier():
        return f"{path}[{key!r}]"
    return f"{path}.{key}" if path else key


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _magnitude_ok(value: int | float, low: float, high: float) -> bool:
    return value == 0 or low <= abs(value) <= high


def _any(value: Any, path: str) -> None:
    """Any JSON value (shown with ``str()``)."""


def _text(value: Any, path: str) -> None:
    if value is None or isinstance(value, (str, bool)):
        return
    if _is_number(value) and abs(value) <= MAX_MAGNITUDE:
        return
    raise _Invalid(path, f"must be text or null, got {_got(value)}")


def _bool(value: Any, path: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise _Invalid(path, f"must be true, false or null, got {_got(value)}")


def _number(low: float, high: float, nullable: bool = True) -> Check:
    def check(value: Any, path: str) -> None:
        if value is None and nullable:
            return
        if not _is_number(value) or not _magnitude_ok(value, low, high):
            raise _Invalid(path, f"must be {'null, ' if nullable else ''}0 or a number of magnitude between {low:g} and {high:g}, got {_got(value)}")

    return check


_num = _number(MIN_MAGNITUDE, MAX_MAGNITUDE)
_chart_num = _number(RESULTS_MIN_MAGNITUDE, RESULTS_MAX_MAGNITUDE)
_chart_t = _number(RESULTS_MIN_MAGNITUDE, RESULTS_MAX_MAGNITUDE, nullable=False)


def _list(item: Check, nullable: bool = False, max_items: int | None = None) -> Check:
    def check(value: Any, path: str) -> None:
        if value is None and nullable:
            return
        if not isinstance(value, list):
            raise _Invalid(path, f"must be a list{' or null' if nullable else ''}, got {_got(value)}")
        if max_items is not None and len(value) > max_items:
            raise _Invalid(path, f"has {len(value)} items, at most {max_items} expected")
        for index, entry in enumerate(value):
            item(entry, _join(path, index))

    return check


def _object(
    fields: dict[str, Check],
    required: tuple[str, ...] = (),
    nullable: bool = False,
    extra: Callable[[dict[str, Any], str], None] | None = None,
) -> Check:
    """An object whose listed fields (when present; ``required`` ones always) pass their check.
    Fields not listed are not read by the renderers and are left alone."""

    def check(value: Any, path: str) -> None:
        if value is None and nullable:
            return
        if not isinstance(value, dict):
            raise _Invalid(path, f"must be an object{' or null' if nullable else ''}, got {_got(value)}")
        for key in required:
            if key not in value:
                raise _Invalid(_join(path, key), "is missing")
        for key, field_check in fields.items():
            if key in value:
                field_check(value[key], _join(path, key))
        if extra is not None:
            extra(value, path)

    return check


def _mapping(item: Check) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _Invalid(path, f"must be an object, got {_got(value)}")
        for key, entry in value.items():
            item(entry, _join(path, str(key)))

    return check


def _choice(options: tuple[str, ...]) -> Check:
    def check(value: Any, path: str) -> None:
        if value is not None and value not in options:
            raise _Invalid(path, f"must be one of {', '.join(options)} or null, got {_got(value)}")

    return check


def _texts(*names: str) -> dict[str, Check]:
    return {name: _text for name in names}


def _anys(*names: str) -> dict[str, Check]:
    return {name: _any for name in names}


def _nums(*names: str) -> dict[str, Check]:
    return {name: _num for name in names}


def _same_length(line: dict[str, Any], path: str) -> None:
    if len(line["t"]) != len(line["v"]):
        raise _Invalid(path, f"has {len(line['t'])} times (t) but {len(line['v'])} values (v)")


_WHERE = ("source", "host", "rank", "device", "device_type", "device_name")

_SOURCE = _object({**_texts("kind", "label", "suite", "gpuscope_version", "samples"), "created": _num, "partial": _bool, "partial_reason": _any})

_SYSTEM = _object(
    {
        **_texts("source", "host"),
        **_anys("cpu_model", "logical_cores", "physical_cores", "os", "python", "torch", "cuda", "driver", "blas", "numpy"),
        "gpus": _list(_object(_anys("device", "name", "rank", "memory_total_bytes", "uuid", "pci_bus_id")), nullable=True),
    }
)

_CEILING = _object(
    {
        **_texts(*_WHERE, "kind", "name", "unit", "n"),
        **_nums("value", "datasheet_value", "percent_of_spec", "spread_percent", "median_value", "below_median_percent"),
        "statistic": _any,
        "low": _bool,
        "straggler": _bool,
    }
)

_STRAGGLER = _object({**_texts(*_WHERE, "kind", "name", "unit"), **_nums("value", "median", "below_median_percent")})

_WORKLOAD = _object(
    {
        **_texts(*_WHERE, "name", "bound", "roof"),
        **_anys("n", "bytes_rule"),
        **_nums("flops", "bytes", "time_s", "spread_percent", "intensity_flop_per_byte", "flop_per_s", "bytes_per_s", "attainable_flop_per_s", "efficiency_percent"),
        "above_roof": _bool,
    }
)

_MEASUREMENT = _object(
    {
        **_texts("source", "host", "rank"),
        **_anys("id", "name", "kind", "device", "status", "statistic", "error", "n"),
        **_nums("start", "end", "flop_per_s", "bytes_per_s", "time_s"),
    }
)

_ROOF = _object(
    {
        **_texts(*_WHERE, "kind", "name", "unit", "origin", "label", "note", "level"),
        "value": _chart_num,
        "chart": _bool,
        "main": _bool,
        "straggler": _bool,
    },
    required=("kind", "device", "value"),
)

_POINT = _object(
    {
        **_texts(*_WHERE, "name", "dtype", "intensity_basis", "bound", "roof", "note"),
        **_nums("intensity_flop_per_byte", "flop_per_s", "attainable_flop_per_s", "efficiency_percent"),
        "above_roof": _bool,
        "straggler": _bool,
    }
)

_ROOFLINE = _object(
    {
        "available": _bool,
        "note": _text,
        "notes": _list(_text, nullable=True),
        "warnings": _list(_text, nullable=True),
        "roofs": _list(_ROOF, nullable=True),
        "points": _list(_POINT, nullable=True),
        "datasheet": _list(_object({**_texts("device", "host", "rank", "kind", "name", "unit"), "value": _num}), nullable=True),
    }
)

_LINE = _object(
    {**_texts("key", "label", "metric"), "t": _list(_chart_t, max_items=MAX_POINTS_PER_LINE), "v": _list(_chart_num, max_items=MAX_POINTS_PER_LINE), "style": _choice(LINE_STYLES)},
    required=("key", "label", "t", "v"),
    extra=_same_length,
)

_PANEL = _object({**_texts("id", "title", "unit"), "lines": _list(_LINE)}, required=("title", "unit", "lines"))

_TELEMETRY = _object(
    {
        **_texts("source", "samples", "gpu_unavailable"),
        **_nums("start", "end", "duration_s", "interval_s", "mean_sample_cost_s"),
        "gpus": _list(_object(_texts("key", "label", "index", "name", "uuid"), required=("key",)), nullable=True),
        "stats": _list(_object({**_texts("key", "subject", "metric", "label", "unit", "n"), **_nums("mean", "p50", "p95", "max")}), nullable=True),
        "energy": _list(_object({**_texts("key", "subject", "method"), **_nums("energy_j", "duration_s", "mean_power_w")}), nullable=True),
        "unavailable": _list(_object(_texts("key", "subject", "metric", "label", "reason")), nullable=True),
        "panels": _list(_PANEL, nullable=True, max_items=MAX_PANELS),
        "processes": _list(_object({**_texts("key", "subject", "pid"), **_anys("name", "user"), **_nums("max_gpu_memory_bytes", "max_sm_percent")}), nullable=True),
    },
    nullable=True,
)

_REPORT = _object(
    {
        **_texts("gpuscope_version", "title"),
        "created": _num,
        "redacted": _bool,
        "low_percent_of_spec": _mapping(_number(MIN_MAGNITUDE, MAX_MAGNITUDE, nullable=False)),
        "sources": _list(_SOURCE, nullable=True),
        "systems": _list(_SYSTEM),
        "ceilings": _list(_CEILING),
        "stragglers": _list(_STRAGGLER, nullable=True),
        "straggler_margin": _num,
        "workloads": _list(_WORKLOAD),
        "measurements": _list(_MEASUREMENT),
        "roofline": _ROOFLINE,
        "telemetry": _TELEMETRY,
        "summary": _list(_text, nullable=True),
        "warnings": _list(_text, nullable=True),
        "results": _list(_object({"label": _text, "document": _any}, required=("document",))),
    },
    required=("systems", "ceilings", "workloads", "measurements", "roofline", "results"),
)


def check_report_document(data: dict[str, Any], source: str) -> None:
    """Check every field of a report document that the renderers and ``make_report`` read,
    embedded results documents included (with :func:`gpuscope.results.validate_results`).
    Raises :class:`BadInputError`: ``"<source>: <field path> <problem>"``, one line."""
    try:
        _REPORT(data, "")
    except _Invalid as exc:
        raise BadInputError(f"{source}: {exc.path or 'the document'} {exc.problem}") from None
    for index, entry in enumerate(data["results"]):
        document = entry["document"]
        if not isinstance(document, dict):
            raise BadInputError(f"{source}: results[{index}].document must be an object, got {_got(document)}")
        validate_results(document, f"{source}: results[{index}].document")
