"""The one rule set for every file gpuscope reads: number types, strict decoding, one-line errors.

Rules, each stated once:

- *types*: declared by :class:`msgspec.Struct` classes (``gpuscope.schema.*``); ``true`` is never
  a number, a number is never a string, ``null`` only where the type says ``| None``;
- *non-finite numbers*: JSON has no NaN or infinity; a literal that overflows a float (``1e400``)
  is refused by the decoder, and :data:`Finite` refuses NaN and infinity in values built in memory;
- *ranges*: ``Annotated[float, Meta(ge=..., le=...)]`` on the field (:data:`Rate`, :data:`Seconds`...);
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
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import msgspec

from gpuscope.errors import BadInputError

__all__ = [
    "MAX_FLOAT",
    "Finite",
    "NonNegative",
    "Magnitude",
    "Rate",
    "Seconds",
    "Count",
    "Text",
    "Scalar",
    "Detail",
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
#: A count (samples, cores, ranks).
Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
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
#: The deepest nesting a gpuscope JSON document may have (gpuscope writes at most about 10).
MAX_DEPTH = 32
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


def finite_or_none(value: Any) -> float | None:
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


def convert(data: Any, type: type[T], source: str) -> T:
    """Check already-parsed ``data`` (dicts and lists) as ``type``; errors as :func:`decode_json`."""
    try:
        return msgspec.convert(data, type=type, strict=True)
    except RecursionError:
        raise BadInputError(f"{source}: JSON nested too deeply") from None
    except msgspec.MsgspecError as exc:
        raise BadInputError(f"{source}: {problem_of(exc)}") from None


def _enc_hook(value: Any) -> Any:
    """Objects msgspec does not know: ``to_json()``, paths, numpy scalars (``item()``), else text."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return str(value)


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode_json(value: Any, indent: int | None = None) -> bytes:
    """``value`` (structs, dicts, lists, records with ``to_json``) as JSON; NaN and infinity
    become ``null``. ``indent``: pretty-print with that many spaces."""
    data = _ENCODER.encode(value)
    if indent:
        data = msgspec.json.format(data, indent=indent)
    return data
