"""Flattening records to CSV columns and back.

A column name is the path to the value in the JSON record, joined with dots; list items are
addressed by position: ``host.cores.0.utilization_percent``, ``gpus.1.power_w``,
``gpus.0.nvlink_links.3.tx_bytes_per_s``. Lists whose length changes from tick to tick
(``gpus.N.processes``) and lists of plain values (``gpus.N.throttle_reasons``) are one cell
holding compact JSON. See docs/telemetry-schema.md.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable
from typing import Union, get_args, get_origin

from gpuscope.telemetry.records import JsonObject, JsonValue, Sample
from gpuscope.telemetry.values import Unavailable
from gpuscope.textsafe import safe_text

__all__ = ["JSON_CELL_FIELDS", "flatten_record", "unflatten_row", "encode_cell", "column_converter"]

#: Record lists written as one JSON cell in CSV (their length varies from sample to sample).
JSON_CELL_FIELDS = frozenset({"processes", "xid_events", "xid_recent"})


def flatten_record(data: JsonObject) -> tuple[dict[str, JsonValue], dict[str, str]]:
    """``record_to_dict`` output -> (column -> value, column -> unavailable reason).

    Values are scalars, None, or (for JSON cells) lists; the second map holds
    ``"reason: detail"`` for each unavailable column.
    """
    values: dict[str, JsonValue] = {}
    missing: dict[str, str] = {}
    _flatten_into(data, "", values, missing)
    return values, missing


def _flatten_into(data: JsonObject, prefix: str, values: dict[str, JsonValue], missing: dict[str, str]) -> None:
    unavailable = data.get("unavailable")
    for name, reason in (unavailable if isinstance(unavailable, dict) else {}).items():
        missing[prefix + name] = str(reason)
    for name, value in data.items():
        if name == "unavailable":
            continue
        key = prefix + name
        if isinstance(value, dict):
            _flatten_into(value, key + ".", values, missing)
        elif isinstance(value, list) and name not in JSON_CELL_FIELDS and value:
            items = [item for item in value if isinstance(item, dict)]
            if len(items) == len(value):
                for index, item in enumerate(items):
                    _flatten_into(item, f"{key}.{index}.", values, missing)
            else:
                values[key] = value
        else:
            values[key] = value


def encode_cell(value: JsonValue) -> str:
    """One CSV cell: None -> empty, bools -> true/false, floats -> shortest repr, lists -> JSON."""
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    text = str(value)
    if "\n" in text or "\r" in text:
        text = text.replace("\r", " ").replace("\n", " ")  # one record, one line
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a name that is not UTF-8: written as encode_json writes it
            text = safe_text(text)
    return text


# --- reading back ----------------------------------------------------------------------------


def _strip_metric(annotation: object) -> object:
    """``Metric[float]`` / ``int | None`` -> ``float`` / ``int``."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not Unavailable and a is not type(None)]
        if len(args) == 1:
            return _strip_metric(args[0])
        return annotation
    return annotation


@functools.cache
def _hint(cls: type, name: str) -> object | None:
    """The annotation of field ``name`` of dataclass ``cls`` (None: no such field)."""
    return typing.get_type_hints(cls).get(name)


def column_converter(column: str) -> Callable[[str], JsonValue]:
    """A function turning a non-empty CSV cell of ``column`` back into its JSON value."""
    annotation: object = Sample
    for part in column.split("."):
        annotation = _strip_metric(annotation)
        if get_origin(annotation) is list and part.isdigit():
            annotation = get_args(annotation)[0]
            continue
        if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
            annotation = _hint(annotation, part)
            if annotation is None:
                return _guess
            continue
        return _guess
    annotation = _strip_metric(annotation)
    if annotation is bool:
        return _to_bool
    if annotation is int:
        return _to_int
    if annotation is float:
        return float
    if annotation is str:
        return str
    return _json


def _to_bool(cell: str) -> bool:
    if cell in ("true", "false"):
        return cell == "true"
    raise ValueError(f"expected true or false, got {cell!r}")


def _to_int(cell: str) -> int:
    return int(cell)


def _json(cell: str) -> JsonValue:
    value: JsonValue = json.loads(cell)
    return value


def _guess(cell: str) -> JsonValue:
    """A column this gpuscope does not know (a newer log): JSON when it parses, else text."""
    try:
        return _json(cell)
    except ValueError:
        return cell


def unflatten_row(cells: dict[str, JsonValue], missing: dict[str, str]) -> JsonObject:
    """Column values (already converted; None for empty) plus the unavailable map -> a nested
    dict shaped like ``record_to_dict`` output. List items whose cells are all empty are dropped
    (the item was not present in that sample)."""
    root: JsonObject = {}
    for column, value in cells.items():
        _put(root, column.split("."), value)
    for column, reason in missing.items():
        parts = column.split(".")
        parent = _container(root, parts[:-1])
        if parent is not None:
            unavailable = parent.setdefault("unavailable", {})
            if isinstance(unavailable, dict):
                unavailable[parts[-1]] = reason
            parent[parts[-1]] = None
    nested = _lists(root)
    assert isinstance(nested, dict)  # the root's keys are column names, never all digits
    return nested


def _container(root: JsonObject, parts: list[str]) -> JsonObject | None:
    node: JsonObject = root
    for part in parts:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            return None
        node = child
    return node


def _put(root: JsonObject, parts: list[str], value: JsonValue) -> None:
    node = root
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    if parts[-1] not in node or value is not None:
        node[parts[-1]] = value


def _lists(node: JsonValue) -> JsonValue:
    """Turn dicts keyed "0", "1", ... into lists, dropping items with no value at all."""
    if not isinstance(node, dict):
        return node
    converted = {key: _lists(value) for key, value in node.items()}
    if converted and all(key.isdigit() for key in converted):
        items = [converted[key] for key in sorted(converted, key=int)]
        return [item for item in items if not (isinstance(item, dict) and _all_empty(item))]
    return converted


def _all_empty(item: JsonObject) -> bool:
    unavailable = item.get("unavailable")
    reasons = unavailable.values() if isinstance(unavailable, dict) else ()
    return all(value is None or value == [] or key == "unavailable" for key, value in item.items()) and not any(
        not str(reason).startswith(ABSENT_PREFIX) for reason in reasons
    )


#: The unavailable reason written for a column that the header has but the sample lacks.
ABSENT_PREFIX = "not_applicable: not present in this sample"
