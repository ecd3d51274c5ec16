"""``alerts.toml``, the alert thresholds (:mod:`gpuscope.telemetry.alerts`), as declared types.

Each threshold is a triple ``[careful, warning, critical]`` of numbers at least 0, the finite ones
in increasing order (equal neighbours allowed); ``inf`` means that level is never raised (the
default for uncorrected ECC errors is ``[inf, inf, 1]``: one is critical). NaN is refused
(a NaN bound would silently turn its alerts off). ``throttle_levels`` maps a throttle reason to
the level it raises (``ok``: none). Unknown keys are refused: a typo must not silently keep a
default.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = ["Bound", "Triple", "Level", "AlertsFile", "TRIPLES"]

#: One bound: a number >= 0, or ``inf`` (never); NaN fails the comparison and is refused.
Bound = Annotated[float, msgspec.Meta(ge=0)]
#: ``[careful, warning, critical]``.
Triple = tuple[Bound, Bound, Bound]
Level = Literal["ok", "careful", "warning", "critical"]


class AlertsFile(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The keys of ``alerts.toml``; each left out keeps its default."""

    gpu_temperature_c: Triple | None = None
    memory_temperature_c: Triple | None = None
    power_fraction_of_cap: Triple | None = None
    memory_used_fraction: Triple | None = None
    ecc_corrected_errors: Triple | None = None
    ecc_uncorrected_errors: Triple | None = None
    throttle_levels: dict[str, Level] | None = None


#: The triple-valued keys (their order is checked by gpuscope.telemetry.alerts.load_thresholds).
TRIPLES = tuple(name for name in AlertsFile.__struct_fields__ if name != "throttle_levels")
