"""Telemetry log records (``gpuscope log``, JSON lines or CSV) as declared wire types.

The wire types are generated from the record dataclasses of :mod:`gpuscope.telemetry.records`
(one source of truth): a ``Metric[T]`` field becomes ``T | null``, with the reason in the
object's ``unavailable`` map; every object may carry ``unavailable``. The same core rules as every
other file apply (strict types, finite numbers, one-line errors naming the JSON path); unknown
fields are ignored (a log from a newer gpuscope still replays); a missing field becomes
``Unavailable(error, "missing in log")`` (an older gpuscope), except ``timestamp``, which every
record has. A metric ``null`` without a reason becomes ``error: null in log``.

Ranges: every number of a record is declared with its quantity's range in
:mod:`gpuscope.telemetry.records` (:data:`~gpuscope.schema.core.Watts`...); the wire types check
it when reading, and :func:`within_ranges` applies the same ranges to a sample before anything
writes it, so a log gpuscope writes always reads back.

:func:`decode_record` turns one JSON line into a :class:`~gpuscope.telemetry.records.Sample`;
:func:`convert_record` does the same for a dict (a CSV row, unflattened).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec

from gpuscope.schema.core import Finite, problem_of, range_of
from gpuscope.telemetry.records import SCHEMA_VERSION, Sample
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = [
    "WireSample",
    "RecordError",
    "VersionError",
    "decode_record",
    "convert_record",
    "wire_type",
    "field_ranges",
    "within_ranges",
]

#: An integer field: a 64-bit integer, or a float with an integral value (as older writers and
#: ``memory_used_bytes = 30e9`` produce; kept as written).
_Int = (
    Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
    | Annotated[float, msgspec.Meta(multiple_of=1, ge=-(2**63), le=2**64)]
)
_SCALARS: dict[Any, Any] = {float: Finite, int: _Int, bool: bool, str: str}
_MISSING = Unavailable(Reason.ERROR, "missing in log")
_NULL = Unavailable(Reason.ERROR, "null in log")


class RecordError(ValueError):
    """A record does not match the wire types; ``str(error)`` is one line naming the JSON path."""


class VersionError(RecordError):
    """A record of a schema version this gpuscope does not read (or of none)."""


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How the fields of one record class are rebuilt from a wire struct."""

    records: tuple[tuple[str, type, bool], ...]  # (field, record class, is a list)
    metrics: frozenset[str]  # may be Unavailable
    defaults: frozenset[str]  # have a dataclass default
    reasons: frozenset[str]  # ``Unavailable | None`` stored as its "reason: detail" string
    # The same by position (the wire struct's fields are the record's, in order, then ``unavailable``):
    positions: dict[str, int]  # field -> position
    record_at: tuple[tuple[int, type, bool], ...]
    reason_at: tuple[int, ...]
    metric_values: Callable[[Sequence[Any]], tuple[Any, ...]]  # the metric fields' values, for the None check
    ranged: tuple[tuple[str, float, float, bool, bool], ...]  # (field, low, high, is a metric, is an int)


_WIRE: dict[type, type] = {}
_PLANS: dict[type, _Plan] = {}


def _split(annotation: Any) -> tuple[Any, bool, bool]:
    """(inner annotation, nullable, metric) of ``X | None`` / ``Metric[X]``."""
    nullable = metric = False
    if get_origin(annotation) in (Union, types.UnionType):
        rest = []
        for arg in get_args(annotation):
            if arg is type(None):
                nullable = True
            elif arg is Unavailable:
                metric = True
            else:
                rest.append(arg)
        annotation = rest[0] if len(rest) == 1 else (None if not rest else Union[tuple(rest)])  # noqa: UP007
    return annotation, nullable, metric


def _wire_of(annotation: Any) -> tuple[Any, type | None, bool]:
    """(wire type, record class, is a list) of a non-null annotation."""
    if get_origin(annotation) is list:
        element, record, _ = _wire_of(get_args(annotation)[0])
        return list[element], record, True  # type: ignore[valid-type]  # built at run time
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return wire_type(annotation), annotation, False
    bounds = range_of(annotation)
    if bounds is not None and get_args(annotation)[0] is int:  # integral floats too, as in _Int
        integral = Annotated[float, msgspec.Meta(multiple_of=1, ge=bounds[0], le=bounds[1])]
        return Union[annotation, integral], None, False  # noqa: UP007 - built at run time
    if bounds is not None:
        return annotation, None, False
    return _SCALARS.get(annotation, Any), None, False


def _getter(indices: tuple[int, ...]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """The values at ``indices`` of a list, always as a tuple."""
    if len(indices) > 1:
        return operator.itemgetter(*indices)
    return lambda values: tuple(values[index] for index in indices)


def wire_type(cls: type) -> type:
    """The msgspec Struct of record class ``cls`` as it is written to a log (generated once)."""
    found = _WIRE.get(cls)
    if found is not None:
        return found
    hints = typing.get_type_hints(cls, include_extras=True)
    fields: list[tuple[str, Any, Any]] = []
    records, metrics, defaults, reasons = [], set(), set(), set()
    ranged: list[tuple[str, float, float, bool, bool]] = []
    for field in dataclasses.fields(cls):
        inner, nullable, metric = _split(hints[field.name])
        bounds = range_of(inner)
        if bounds is not None:
            ranged.append((field.name, *bounds, metric, get_args(inner)[0] is int))
        if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
            defaults.add(field.name)
        if inner is None:  # Unavailable | None: the reason string, or null
            wire: Any = str | None
            reasons.add(field.name)
        else:
            wire, record, as_list = _wire_of(inner)
            if record is not None:
                records.append((field.name, record, as_list))
            if metric:
                metrics.add(field.name)
            if nullable or metric:
                wire = Union[wire, None]  # noqa: UP007 - ``wire`` is built at run time
        if cls is Sample and field.name == "schema_version":  # checked first, with its own message
            wire = Any
        if cls is Sample and field.name == "timestamp":
            fields.append((field.name, wire, msgspec.NODEFAULT))
        else:
            fields.append((field.name, Union[wire, msgspec.UnsetType], msgspec.UNSET))  # noqa: UP007 - built at run time
    fields.append(("unavailable", dict[str, str], msgspec.field(default_factory=dict)))
    struct = msgspec.defstruct(f"Wire{cls.__name__}", fields, kw_only=True, module=__name__)
    _WIRE[cls] = struct
    positions = {field.name: index for index, field in enumerate(dataclasses.fields(cls))}
    _PLANS[cls] = _Plan(
        tuple(records), frozenset(metrics), frozenset(defaults), frozenset(reasons), positions,
        tuple((positions[name], record, as_list) for name, record, as_list in records),
        tuple(positions[name] for name in reasons),
        _getter(tuple(positions[name] for name in metrics)),
        tuple(ranged),
    )  # fmt: skip
    return struct


def field_ranges(cls: type) -> dict[str, tuple[float, float, bool]]:
    """``field -> (low, high, is an int)`` of the numbers of record class ``cls`` (its declared ranges)."""
    wire_type(cls)
    return {name: (low, high, is_int) for name, low, high, _, is_int in _PLANS[cls].ranged}


def within_ranges(sample: Sample) -> Sample:
    """``sample`` (changed in place) with every number inside its declared range, so whatever
    writes it, a reader accepts: a reading out of range (NaN, a driver's 0xFFFFFFFF) becomes
    ``error: out of range``; a number that is no reading (a timestamp from a clock that lies,
    an index) is clamped into its range. Costs a few microseconds per GPU."""
    _bound(Sample, sample)
    return sample


def _bound(cls: type, record: Any) -> None:
    plan = _PLANS[cls]
    for name, low, high, metric, is_int in plan.ranged:
        value = getattr(record, name)
        if value.__class__ is not float and value.__class__ is not int:
            continue  # None, Unavailable, a bool; a wrong type is the wire types' to refuse
        if low <= value <= high:
            continue
        if metric:
            setattr(record, name, Unavailable(Reason.ERROR, f"out of range: {value!r} is not in {low:g}..{high:g}"))
        else:
            clamped = low if value != value or value < low else high  # NaN (value != value) to low
            setattr(record, name, int(clamped) if is_int else clamped)
    for name, child, as_list in plan.records:
        value = getattr(record, name)
        if value is None or value.__class__ is Unavailable:
            continue
        for item in value if as_list else (value,):
            _bound(child, item)


_UNSET = msgspec.UNSET
_asdict = msgspec.structs.asdict
_astuple = msgspec.structs.astuple


#: The reasons of a log repeat from record to record; Unavailable is frozen, so one object serves.
_reason = functools.lru_cache(maxsize=4096)(Unavailable.from_json)


def _build_fast(cls: type, wire: Any) -> Any:
    """:func:`_build` for the usual record: every field present, a metric null only with its reason
    in ``unavailable``; the record is made from the fields by position (several times faster).
    Anything else goes to :func:`_build`."""
    plan = _PLANS[cls]
    values = list(_astuple(wire))
    missing = values.pop()
    if _UNSET in values:
        return _build(cls, wire)
    nulls = plan.metric_values(values).count(None)  # each needs its reason in ``unavailable``
    for name, reason in missing.items():
        if name in plan.metrics:
            position = plan.positions[name]
            nulls -= values[position] is None
        elif name in plan.reasons:
            position = plan.positions[name]
        else:
            return _build(cls, wire)  # _build says what is wrong
        values[position] = _reason(reason)
    if nulls:
        return _build(cls, wire)
    for index, record, as_list in plan.record_at:
        value = values[index]
        if value is not None and value.__class__ is not Unavailable:
            values[index] = _build_list(record, value) if as_list else _build_fast(record, value)
    for index in plan.reason_at:
        value = values[index]
        if value.__class__ is str:
            values[index] = _reason(value)
    return cls(*values)


def _build_list(cls: type, wires: list[Any]) -> list[Any]:
    """:func:`_build_fast` of each item; a record of plain fields (a core, a link, a process) with
    nothing missing is made straight from its fields."""
    plan = _PLANS[cls]
    if plan.record_at or plan.reason_at:
        return [_build_fast(cls, wire) for wire in wires]
    out = []
    for wire in wires:
        values = _astuple(wire)
        if values[-1] or _UNSET in values or None in plan.metric_values(values):
            out.append(_build_fast(cls, wire))
        else:
            out.append(cls(*values[:-1]))
    return out


def _build(cls: type, wire: Any) -> Any:
    plan = _PLANS[cls]
    kwargs = _asdict(wire)
    missing = kwargs.pop("unavailable")
    for name in [name for name, value in kwargs.items() if value is None or value is _UNSET]:
        if kwargs[name] is None:
            if name in plan.metrics:
                kwargs[name] = _NULL
        elif name in plan.defaults:
            del kwargs[name]
        else:
            kwargs[name] = _MISSING
    for name, record, as_list in plan.records:
        value = kwargs.get(name)
        if value is not None and value is not _MISSING and value is not _NULL:
            kwargs[name] = [_build(record, item) for item in value] if as_list else _build(record, value)
    for name in plan.reasons:
        value = kwargs.get(name)
        if isinstance(value, str):
            kwargs[name] = Unavailable.from_json(value)
    for name, reason in missing.items():
        if name in plan.metrics or name in plan.reasons:
            kwargs[name] = Unavailable.from_json(reason)
        elif name in kwargs or name in plan.defaults:
            raise RecordError(f"field `{name}` is listed as unavailable, but it always has a value")
    return cls(**kwargs)


WireSample = wire_type(Sample)
_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(WireSample)


def _check_version(version: Any) -> None:
    if version is msgspec.UNSET:
        raise VersionError("record has no schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise VersionError(f"schema_version {version!r} is not supported (this gpuscope reads {SCHEMA_VERSION})")


def decode_record(line: bytes | str) -> Sample:
    """One JSON log line as a :class:`Sample`. Raises :class:`RecordError` (one line, JSON path),
    ``msgspec.DecodeError`` when the line is not JSON, ``RecursionError`` when nested too deeply."""
    wire = _DECODER.decode(line)
    _check_version(wire.schema_version)
    sample: Sample = _build_fast(Sample, wire)
    return sample


def convert_record(data: dict[str, Any]) -> Sample:
    """A record dict (``record_to_dict`` shape, e.g. an unflattened CSV row) as a :class:`Sample`.
    Raises :class:`RecordError` (one line, JSON path)."""
    try:
        wire: Any = msgspec.convert(data, WireSample, strict=True)
    except msgspec.ValidationError as exc:
        raise RecordError(problem_of(exc)) from None
    _check_version(wire.schema_version)
    sample: Sample = _build(Sample, wire)
    return sample
