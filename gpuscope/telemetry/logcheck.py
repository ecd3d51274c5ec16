"""Type checks of telemetry records read back from a log file (replay, reports).

:func:`check_record` walks one decoded record against the field types of
:class:`gpuscope.telemetry.records.Sample` and raises :class:`RecordTypeError` naming the first
field whose value has the wrong type (``gpus[1].power_w is a string, expected a number``), so a
hand-edited or foreign file is a one-line error instead of a crash deep inside a consumer.

Rules: unknown keys are ignored (a newer gpuscope); a missing field is left for
``record_from_dict`` (it becomes unavailable), except ``timestamp``, which every record has; numbers must be finite; ``null`` is accepted where the field may be
unavailable or optional (a metric ``null`` without a reason gets ``error: null in log``).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.values import Unavailable

__all__ = ["RecordTypeError", "check_record", "REQUIRED_TOP_LEVEL"]

#: Fields every record must carry.
REQUIRED_TOP_LEVEL = ("timestamp",)
#: Largest magnitude accepted for an integer (NVML counters are 64-bit).
_MAX_INT = 2**64
_NULL_REASON = "error: null in log"


class RecordTypeError(ValueError):
    """A record's field has the wrong type; ``str(error)`` is one line naming the field."""


@dataclass(frozen=True)
class _Spec:
    kind: str  # "int", "float", "bool", "str", "record", "list", "unavailable", "any"
    nullable: bool = False
    metric: bool = False  # may be unavailable (null plus an entry in "unavailable")
    record: type | None = None  # for "record", and for "list" of records
    element: "_Spec | None" = None  # for "list"


_SPECS: dict[type, dict[str, _Spec]] = {}


def _spec_of(annotation: Any) -> _Spec:
    nullable = metric = False
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = []
        for arg in get_args(annotation):
            if arg is type(None):
                nullable = True
            elif arg is Unavailable:
                metric = True
            else:
                args.append(arg)
        if not args:  # ``Unavailable | None``: stored as its "reason: detail" string
            return _Spec("unavailable", nullable=True)
        if len(args) > 1:
            return _Spec("any", nullable=True)
        annotation = args[0]
        origin = get_origin(annotation)
    if origin is list:
        element = _spec_of(get_args(annotation)[0])
        return _Spec("list", nullable or metric, metric, element.record, element)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _Spec("record", nullable or metric, metric, annotation)
    for kind in (bool, int, float, str):  # bool before int: bool is an int subclass
        if annotation is kind:
            return _Spec(kind.__name__, nullable or metric, metric)
    return _Spec("any", nullable=True)


def _specs(cls: type) -> dict[str, _Spec]:
    specs = _SPECS.get(cls)
    if specs is None:
        hints = typing.get_type_hints(cls)
        specs = {field.name: _spec_of(hints[field.name]) for field in dataclasses.fields(cls)}
        _SPECS[cls] = specs
    return specs


_KIND_WORDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "record": "an object",
    "list": "a list",
    "unavailable": "a string",
}


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _fail(path: str, value: Any, spec: _Spec) -> RecordTypeError:
    return RecordTypeError(f"field '{path}' is {_describe(value)}, expected {_KIND_WORDS.get(spec.kind, 'a value')}")


def _check_number(path: str, value: Any, spec: _Spec) -> None:
    if isinstance(value, float):
        if spec.kind == "int" and not value.is_integer():
            raise _fail(path, value, spec)
        if not math.isfinite(value):
            raise RecordTypeError(f"field '{path}' is {value!r}, expected a finite number")
    elif abs(value) > _MAX_INT:
        raise RecordTypeError(f"field '{path}' is an integer out of range (more than 64 bits)")


def _check_value(path: str, value: Any, spec: _Spec) -> None:
    kind = spec.kind
    if kind == "any":
        return
    if kind in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(path, value, spec)
        _check_number(path, value, spec)
    elif kind == "bool":
        if not isinstance(value, bool):
            raise _fail(path, value, spec)
    elif kind in ("str", "unavailable"):
        if not isinstance(value, str):
            raise _fail(path, value, spec)
    elif kind == "record":
        if not isinstance(value, dict):
            raise _fail(path, value, spec)
        assert spec.record is not None
        _check_object(path, value, spec.record)
    elif kind == "list":
        if not isinstance(value, list):
            raise _fail(path, value, spec)
        element = spec.element
        assert element is not None
        for position, item in enumerate(value):
            item_path = f"{path}[{position}]"
            if item is None:
                raise RecordTypeError(f"field '{item_path}' is null, expected {_KIND_WORDS.get(element.kind, 'a value')}")
            _check_value(item_path, item, element)


def _check_object(path: str, data: dict[str, Any], cls: type) -> None:
    prefix = f"{path}." if path else ""
    missing = data.get("unavailable")
    if missing is None:
        missing = {}
    elif not isinstance(missing, dict):
        raise RecordTypeError(f"field '{prefix}unavailable' is {_describe(missing)}, expected an object")
    else:
        for name, reason in missing.items():
            if not isinstance(reason, str):
                raise RecordTypeError(f"field '{prefix}unavailable.{name}' is {_describe(reason)}, expected a string")
    for name, spec in _specs(cls).items():
        if name in missing:
            if not spec.metric and spec.kind != "unavailable":
                raise RecordTypeError(f"field '{prefix}{name}' is listed as unavailable, but it always has a value")
            continue
        if name not in data:
            continue
        value = data[name]
        if value is None:
            if spec.metric:
                if "unavailable" not in data:
                    data["unavailable"] = missing
                missing[name] = _NULL_REASON
                continue
            if spec.nullable:
                continue
            raise RecordTypeError(f"field '{prefix}{name}' is null, expected {_KIND_WORDS.get(spec.kind, 'a value')}")
        _check_value(prefix + name, value, spec)


def check_record(data: dict[str, Any]) -> None:
    """Raise :class:`RecordTypeError` (one line, naming the field) when ``data`` is not shaped
    like a ``record_to_dict(Sample)`` object. May add ``error: null in log`` reasons for metric
    fields that are ``null`` without one."""
    for name in REQUIRED_TOP_LEVEL:
        if name not in data:
            raise RecordTypeError(f"field '{name}' is missing")
    _check_object("", data, Sample)
