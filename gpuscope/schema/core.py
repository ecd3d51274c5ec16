"""The one rule set for every file gpuscope reads: number types, strict decoding, one-line errors.

Rules, each stated once:

- *types*: declared by :class:`msgspec.Struct` classes (``gpuscope.schema.*``); ``true`` is never
  a number, a number is never a string, ``null`` only where the type says ``| None``;
- *non-finite numbers*: JSON has no NaN or infinity; a literal that overflows a float (``1e400``)
  is refused by the decoder, and :data:`Finite` refuses NaN and infinity in values built in memory;
- *ranges*: ``Annotated[float, Meta(ge=..., le=...)]`` on the field (:data:`Rate`, :data:`Seconds`...),
  one per quantity (:data:`Timestamp`, :data:`Watts`...), the same for the writer that checks a
  sample (:func:`gpuscope.telemetry.wire.within_ranges`), every reader and every display;
- *unknown fields*: documents written by gpuscope (results, report) may carry fields a reader does
  not declare (a newer 1.x writer, a probe's extra detail): they are kept in the dict view and
  ignored by the typed view; hand-written files (suites, themes, settings) refuse unknown keys,
  since a typo there would silently change a run;
- *errors*: one line, ``<file>: <problem> - at `$.json.path```, exit 3 (:class:`BadInputError`).

Writing: :func:`encode_json` stores NaN and infinity as ``null`` (msgspec's rule), the one
finite-JSON cleaner of the package.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Annotated, Any, TypeAlias, TypeVar, cast, get_args, get_origin

import msgspec

from gpuscope.errors import BadInputError
from gpuscope.textsafe import safe_text

__all__ = [
    "MAX_FLOAT",
    "Finite",
    "Real",
    "MAX_TIMESTAMP_S",
    "Timestamp",
    "ElapsedS",
    "Percent",
    "Watts",
    "Joules",
    "Celsius",
    "Megahertz",
    "BytesPerS",
    "Index",
    "LoadAverage",
    "GbitPerS",
    "MbitPerS",
    "range_of",
    "timestamp_now_s",
    "NonNegative",
    "Magnitude",
    "Rate",
    "Seconds",
    "Count",
    "Text",
    "Scalar",
    "Detail",
    "DetailMap",
    "JsonTree",
    "JsonObject",
    "detail_map",
    "as_detail",
    "MAX_DEPTH",
    "decode_tree",
    "NonEmpty",
    "MIN_MAGNITUDE",
    "MAX_MAGNITUDE",
    "convert",
    "decode_json",
    "encode_json",
    "finite_or_none",
    "problem_of",
]

T = TypeVar("T")

MAX_FLOAT = 1.7976931348623157e308
#: Measured quantities (rates, FLOPs, bytes, seconds) of a results file: 0 or a magnitude up to
#: MAX_MAGNITUDE, and times of at least MIN_MAGNITUDE, so every rate, intensity and chart position
#: derived from them stays a finite float (1e30 FLOP/s is far beyond any machine).
MIN_MAGNITUDE = 1e-15
MAX_MAGNITUDE = 1e30

#: Any finite number (NaN and infinity refused).
Finite = Annotated[float, msgspec.Meta(ge=-MAX_FLOAT, le=MAX_FLOAT)]
#: 0 or a positive measured quantity (FLOPs, bytes, counts as floats).
NonNegative = Annotated[float, msgspec.Meta(ge=0, le=MAX_MAGNITUDE)]
#: A strictly positive measured quantity of sane magnitude (a roof, a rate).
Magnitude = Annotated[float, msgspec.Meta(ge=MIN_MAGNITUDE, le=MAX_MAGNITUDE)]
Rate = Magnitude
#: A duration: 0 or at least MIN_MAGNITUDE seconds is not expressible as one bound, so durations
#: that divide (a workload's time per call) use Magnitude; free durations use this.
Seconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_MAGNITUDE)]
#: A count (samples, cores, ranks, ECC errors) or a size in bytes: a signed 64-bit integer's range.
Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
#: A signed number of sane magnitude (a ratio, a spread, a median): what a report derives from it
#: (a percentage, a product with a rate) stays within the report's own range.
Real = Annotated[float, msgspec.Meta(ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE)]

# --- one range per measured quantity: writer (within_ranges), readers, schemas and displays ---
#: Wall-clock timestamps, seconds since the epoch. From 1970: Linux refuses to set its clock
#: earlier (settimeofday: EINVAL), so no gpuscope writer can stamp a time before it. Up to
#: 9999-12-31 00:00 UTC: the last instant every display (datetime, strftime) shows in every time
#: zone (UTC+14 is still year 9999); the kernel's own limit (year 2262) lies inside.
MAX_TIMESTAMP_S = 253402214400.0
Timestamp = Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMESTAMP_S)]
#: A time measured on a monotonic clock (never negative), at most the span of :data:`Timestamp`.
ElapsedS = Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMESTAMP_S)]
#: Percentages: NVML's fan speed and GPM's bandwidth share may pass 100, never 1000.
Percent = Annotated[float, msgspec.Meta(ge=0, le=1000)]
#: Board power and power limits (a GPU board draws about 1 kW).
Watts = Annotated[float, msgspec.Meta(ge=0, le=1e6)]
#: Energy counters (NVML's is a 64-bit millijoule counter: at most 1.8e16 J).
Joules = Annotated[float, msgspec.Meta(ge=0, le=1e20)]
#: Temperatures: absolute zero to far above any part's limit.
Celsius = Annotated[float, msgspec.Meta(ge=-273.15, le=1000)]
Megahertz = Annotated[float, msgspec.Meta(ge=0, le=1e6)]
#: Data rates (1e18 B/s is an exabyte a second; a counter glitch beyond that is no reading).
BytesPerS = Annotated[float, msgspec.Meta(ge=0, le=1e18)]
#: Indices and identifiers (core, GPU, link, port, PID, Xid, PCIe generation): 32 bits.
Index = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
LoadAverage = Annotated[float, msgspec.Meta(ge=0, le=1e9)]
GbitPerS = Annotated[float, msgspec.Meta(ge=0, le=1e9)]
MbitPerS = Annotated[float, msgspec.Meta(ge=0, le=1e12)]
#: Free text shown as text.
Text = str
#: A JSON scalar (numbers finite).
Scalar = str | int | Finite | bool | None

_D1 = Scalar | list[Scalar] | dict[str, Scalar]
_D2 = Scalar | list[_D1] | dict[str, _D1]
_D3 = Scalar | list[_D2] | dict[str, _D2]
_D4 = Scalar | list[_D3] | dict[str, _D3]
_D5 = Scalar | list[_D4] | dict[str, _D4]
#: Free detail nobody computes with (a probe's parameters, versions, telemetry snapshots): any
#: JSON at most 6 levels deep, so a hostile file nested 500 deep stops at the decoder.
Detail = Scalar | list[_D5] | dict[str, _D5]
#: A JSON object of free detail as a writer builds it (a measurement's ``parameters``, a telemetry
#: snapshot); :func:`as_detail` makes it a :data:`Detail` field.
DetailMap = dict[str, Detail]
#: A JSON document as parsed (any depth: a whole results or report file), for code that walks
#: it key by key (redaction, a report's embedded documents); never a msgspec field type.
JsonTree: TypeAlias = "str | int | float | bool | None | list[JsonTree] | dict[str, JsonTree]"
#: A JSON object as parsed (:data:`JsonTree`).
JsonObject: TypeAlias = "dict[str, JsonTree]"
#: The deepest nesting a gpuscope JSON document may have (gpuscope writes at most about 10).
MAX_DEPTH = 32
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


def detail_map(detail: object) -> DetailMap:
    """``detail`` when it is a JSON object, else an empty one (a field nobody computes with, read
    by key)."""
    return cast(DetailMap, detail) if isinstance(detail, dict) else {}


def as_detail(value: DetailMap | list[Detail]) -> Detail:
    """What a writer built as a free-detail field. Only the nesting depth differs from what the
    type says (mypy cannot count levels): the results file's decoder checks it where a document is
    checked (the probe runner reads every measurement back before it keeps it)."""
    return cast(Detail, value)


def range_of(annotation: object) -> tuple[float, float] | None:
    """``(low, high)`` of a range type such as :data:`Watts` (``Annotated[float, Meta(ge, le)]``);
    None when ``annotation`` declares no range."""
    if get_origin(annotation) is not Annotated:
        return None
    for meta in get_args(annotation)[1:]:
        if isinstance(meta, msgspec.Meta) and meta.ge is not None and meta.le is not None:
            return meta.ge, meta.le  # as declared: an int bound stays exact (2**63 - 1 is no float)
    return None


def timestamp_now_s() -> float:
    """The wall clock (``time.time()``, seconds since the epoch) within :data:`Timestamp`'s range:
    the stamp every gpuscope writer puts in a file (a clock that lies past the range is clamped,
    so the file still reads back). Durations come from ``time.monotonic``/``perf_counter``, never
    from differences of these."""
    return min(max(time.time(), 0.0), MAX_TIMESTAMP_S)


def finite_or_none(value: object) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None.

    The package's one "number or None" helper."""
    if type(value) is float:  # the common case, first (the TUI calls this ~180 times a sample)
        return value if -MAX_FLOAT <= value <= MAX_FLOAT else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range
        return None
    return number if -MAX_FLOAT <= number <= MAX_FLOAT else None


def problem_of(error: msgspec.MsgspecError, raw: bytes | str | None = None) -> str:
    """msgspec's message as one line: ``expected `float`, got `bool` - at `$.x[3].value``` for
    a wrong value, ``invalid JSON (...)`` or ``not UTF-8 text (byte N)`` for a file that is not JSON."""
    text = str(error).replace("\n", " ")
    for bound in (f"`float` >= {-MAX_FLOAT!r}", f"`float` <= {MAX_FLOAT!r}"):
        text = text.replace(bound, "a finite number")
    if isinstance(error, msgspec.ValidationError):
        return text[:1].lower() + text[1:]
    if isinstance(raw, bytes):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 text (byte {exc.start})"
    return f"invalid JSON ({text})"


def decode_json(
    raw: bytes | str, type: type[T], source: str, on_error: Callable[[msgspec.MsgspecError], str | None] | None = None
) -> T:
    """Decode and check ``raw`` as ``type``; raise one-line :class:`BadInputError` naming ``source``.

    ``on_error(error)`` may return a better message (for example "this is a report file")."""
    try:
        return msgspec.json.decode(raw, type=type, strict=True)
    except RecursionError:
        raise BadInputError(f"{source}: JSON nested too deeply") from None
    except msgspec.MsgspecError as exc:
        better = on_error(exc) if on_error is not None else None
        raise BadInputError(better or f"{source}: {problem_of(exc, raw)}") from None


def decode_tree(raw: bytes, source: str) -> Any:
    """``raw`` as plain dicts and lists (the dict view of a document whose typed view is already
    checked), refused when nested more than :data:`MAX_DEPTH` levels (undeclared fields included)."""
    try:
        data = msgspec.json.decode(raw)
    except RecursionError:
        raise BadInputError(f"{source}: JSON nested too deeply") from None
    except msgspec.MsgspecError as exc:
        raise BadInputError(f"{source}: {problem_of(exc, raw)}") from None
    level: list[Any] = [data]
    for _ in range(MAX_DEPTH):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return data
    raise BadInputError(f"{source}: JSON nested too deeply (more than {MAX_DEPTH} levels)")


def convert(data: object, type: type[T], source: str) -> T:
    """Check already-parsed ``data`` (dicts and lists) as ``type``; errors as :func:`decode_json`."""
    try:
        return msgspec.convert(data, type=type, strict=True)
    except RecursionError:
        raise BadInputError(f"{source}: JSON nested too deeply") from None
    except msgspec.MsgspecError as exc:
        raise BadInputError(f"{source}: {problem_of(exc)}") from None


def _enc_hook(value: object) -> object:
    """Objects msgspec does not know: ``to_json()``, paths, numpy scalars (``item()``), else text."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return str(value)


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)


def _escape_undecodable(value: object) -> object:
    """``value`` with every string that UTF-8 cannot encode (lone surrogates: the bytes of a name
    that is not UTF-8) written as :func:`gpuscope.textsafe.safe_text` shows it (``r\\xff.json``)."""
    if isinstance(value, str):
        return value if value.isascii() or not _SURROGATE.search(value) else safe_text(value)
    if isinstance(value, dict):
        return {_escape_undecodable(key): _escape_undecodable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_escape_undecodable(item) for item in value]
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_json(value: object, indent: int | None = None) -> bytes:
    """``value`` (structs, dicts, lists, records with ``to_json``) as JSON; NaN and infinity
    become ``null``. ``indent``: pretty-print with that many spaces."""
    try:
        data = _ENCODER.encode(value)
    except UnicodeEncodeError:  # a name that is not UTF-8 (a file name's bytes, an argument)
        data = _ENCODER.encode(_escape_undecodable(msgspec.to_builtins(value, enc_hook=_enc_hook)))
    if indent:
        data = msgspec.json.format(data, indent=indent)
    return data
