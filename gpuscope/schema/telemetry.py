"""Telemetry log records (``gpuscope log``, JSON lines or CSV) as declared wire types.

The wire types are generated from the record dataclasses of :mod:`gpuscope.telemetry.records`
(one source of truth): a ``Metric[T]`` field becomes ``T | null``, with the reason in the
object's ``unavailable`` map; every object may carry ``unavailable``. The same core rules as every
other file apply (strict types, finite numbers, one-line errors naming the JSON path); unknown
fields are ignored (a log from a newer gpuscope still replays); a missing field becomes
``Unavailable(error, "missing in log")`` (an older gpuscope), except ``timestamp``, which every
record has. A metric ``null`` without a reason becomes ``error: null in log``.

:func:`decode_record` turns one JSON line into a :class:`~gpuscope.telemetry.records.Sample`;
:func:`convert_record` does the same for a dict (a CSV row, unflattened).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec

from gpuscope.schema.core import Finite, problem_of
from gpuscope.telemetry.records import SCHEMA_VERSION, Sample
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = ["WireSample", "RecordError", "VersionError", "decode_record", "convert_record", "wire_type"]

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
    return _SCALARS.get(annotation, Any), None, False


def wire_type(cls: type) -> type:
    """The msgspec Struct of record class ``cls`` as it is written to a log (generated once)."""
    found = _WIRE.get(cls)
    if found is not None:
        return found
    hints = typing.get_type_hints(cls)
    fields: list[tuple[str, Any, Any]] = []
    records, metrics, defaults, reasons = [], set(), set(), set()
    for field in dataclasses.fields(cls):
        inner, nullable, metric = _split(hints[field.name])
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
    _PLANS[cls] = _Plan(tuple(records), frozenset(metrics), frozenset(defaults), frozenset(reasons))
    return struct


_UNSET = msgspec.UNSET
_asdict = msgspec.structs.asdict


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
    sample: Sample = _build(Sample, wire)
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
