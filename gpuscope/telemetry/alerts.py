"""Alerts: thresholds (careful / warning / critical) over a :class:`Sample`, as glances does.

No Textual. The TUI shows the worst alerts on an alert line, ``gpuscope log`` keeps them in each record's
``alerts`` list (and says on stderr when one starts), and the Prometheus exporter exposes
``gpuscope_alert``.

Thresholds come from ``<config dir>/alerts.toml`` (see :func:`load_thresholds`); the defaults
follow the data-center GPU datasheets: an H100/H200/A100 slows its clocks at about 90 °C GPU
temperature (max operating about 87 °C) and its HBM is rated to 95 °C; the power cap is the
board's enforced power limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gpuscope.errors import BadInputError
from gpuscope.fileio import read_bytes_bounded
from gpuscope.paths import config_dir
from gpuscope.schema.alerts import TRIPLES, AlertsFile
from gpuscope.schema.core import convert, finite_or_none
from gpuscope.telemetry.records import GpuSample, Sample, XidEvent
from gpuscope.telemetry.xid import xid_level
from gpuscope.tomlfile import TomlSyntaxError, parse_toml

__all__ = [
    "LEVELS",
    "Alert",
    "AlertThresholds",
    "evaluate",
    "worst_level",
    "alert_line",
    "load_thresholds",
    "thresholds_path",
    "alert_strings",
    "annotate",
    "exporter_alerts",
]

#: Levels in increasing severity; the index is the level's rank (0 = fine).
LEVELS = ("ok", "careful", "warning", "critical")

#: Throttle (clocks-event) reasons and the level each one raises.
THROTTLE_LEVELS = {
    "sw_power_cap": "careful",
    "hw_power_brake_slowdown": "warning",
    "sw_thermal_slowdown": "warning",
    "hw_slowdown": "critical",
    "hw_thermal_slowdown": "critical",
}


@dataclass
class AlertThresholds:
    """Each triple is (careful, warning, critical); a value at or above a bound raises that level."""

    gpu_temperature_c: tuple[float, float, float] = (80.0, 87.0, 90.0)
    """GPU core temperature, °C: the datasheets' max operating (87) and slowdown (90) temperatures."""
    memory_temperature_c: tuple[float, float, float] = (85.0, 90.0, 95.0)
    """HBM temperature, °C: HBM is rated to 95 °C."""
    power_fraction_of_cap: tuple[float, float, float] = (0.95, 1.0, 1.1)
    """Board power over its enforced power limit (1.0 = at the cap, where clocks drop)."""
    memory_used_fraction: tuple[float, float, float] = (0.90, 0.95, 0.99)
    """GPU memory in use over the total: the next allocation may fail."""
    ecc_corrected_errors: tuple[float, float, float] = (1.0, 100.0, 10000.0)
    """Corrected (volatile) ECC errors since the driver loaded."""
    ecc_uncorrected_errors: tuple[float, float, float] = (math.inf, math.inf, 1.0)
    """Uncorrected ECC errors: one is critical (data was lost)."""
    throttle_levels: dict[str, str] = field(default_factory=lambda: dict(THROTTLE_LEVELS))
    """Throttle reason -> level it raises (reasons not listed raise nothing)."""


@dataclass(frozen=True, slots=True)
class Alert:
    """One threshold crossed. ``gpu`` is the GPU index (None for the host)."""

    level: str  # careful, warning, critical
    # kind: temperature, memory_temperature, power, memory_full, ecc_corrected, ecc_uncorrected,
    # throttle, xid, gpu_lost
    kind: str
    gpu: int | None
    uuid: str
    message: str
    value: float | None = None

    @property
    def rank(self) -> int:
        return LEVELS.index(self.level)


def _level(value: float, bounds: tuple[float, float, float]) -> str | None:
    for level, bound in zip(("critical", "warning", "careful"), reversed(bounds)):
        if value >= bound:
            return level
    return None


def _gpu_label(gpu: GpuSample) -> str:
    if gpu.mig_parent_index is not None:
        return f"GPU {gpu.mig_parent_index} MIG {gpu.mig_gpu_instance_id}.{gpu.mig_compute_instance_id}"
    return f"GPU {gpu.index}"


def _xid_text(event: XidEvent) -> str:
    where = "" if event.gpu_instance_id is None else f" MIG {event.gpu_instance_id}.{event.compute_instance_id}"
    what = f" {event.meaning}" if event.meaning else ""
    times = f" x{event.count}" if event.count > 1 else ""
    return f"Xid {event.xid}{where}{what}{times} at {time.strftime('%H:%M:%S', time.localtime(event.last_time_s))}"


def _xid_alert(gpu: GpuSample, label: str) -> Alert | None:
    """One alert for the Xids of the last minutes (``xid_recent``), at the level of the worst."""
    recent = gpu.xid_recent
    if not isinstance(recent, list) or not recent:
        return None
    ranked = sorted(recent, key=lambda e: (-LEVELS.index(xid_level(e.xid)), -e.last_time_s))
    shown = "; ".join(_xid_text(event) for event in ranked[:2])
    more = f"; +{len(ranked) - 2} more" if len(ranked) > 2 else ""
    return Alert(xid_level(ranked[0].xid), "xid", gpu.index, gpu.uuid, f"{label}: {shown}{more}", float(ranked[0].xid))


def _gpu_alerts(gpu: GpuSample, t: AlertThresholds) -> Iterable[Alert]:
    label = _gpu_label(gpu)
    xid = _xid_alert(gpu, label)
    if xid is not None:  # before the GPU-lost check: Xid 79 usually comes with a lost GPU
        yield xid
    if gpu.state != "ok":
        yield Alert(
            "critical", "gpu_lost", gpu.index, gpu.uuid, f"{label}: GPU lost (fell off the bus; check dmesg for Xid)"
        )
        return
    # each value this sample has, held against its bounds; the message is written only for an
    # alert (evaluated every sample for every GPU, almost always without one)
    temp = finite_or_none(gpu.temperature_gpu_c)
    if temp is not None and (level := _level(temp, t.gpu_temperature_c)):
        message = f"{temp:.0f}°C (slowdown at {t.gpu_temperature_c[2]:.0f}°C)"
        yield Alert(level, "temperature", gpu.index, gpu.uuid, f"{label}: {message}", temp)
    mem_temp = finite_or_none(gpu.temperature_memory_c)
    if mem_temp is not None and (level := _level(mem_temp, t.memory_temperature_c)):
        message = f"memory {mem_temp:.0f}°C (HBM max {t.memory_temperature_c[2]:.0f}°C)"
        yield Alert(level, "memory_temperature", gpu.index, gpu.uuid, f"{label}: {message}", mem_temp)
    power, cap = finite_or_none(gpu.power_w), finite_or_none(gpu.power_limit_w)
    if power is not None and cap and (level := _level(power / cap, t.power_fraction_of_cap)):
        message = f"{power:.0f} W of its {cap:.0f} W cap"
        yield Alert(level, "power", gpu.index, gpu.uuid, f"{label}: {message}", power / cap)
    used, total = finite_or_none(gpu.memory_used_bytes), finite_or_none(gpu.memory_total_bytes)
    if used is not None and total and (level := _level(used / total, t.memory_used_fraction)):
        message = f"memory {100 * used / total:.0f}% full ({(total - used) / 2**30:.1f} GiB free)"
        yield Alert(level, "memory_full", gpu.index, gpu.uuid, f"{label}: {message}", used / total)
    uncorrected = finite_or_none(gpu.ecc_uncorrected_errors)
    if uncorrected is not None and (level := _level(uncorrected, t.ecc_uncorrected_errors)):
        message = f"{uncorrected:.0f} uncorrected ECC errors"
        yield Alert(level, "ecc_uncorrected", gpu.index, gpu.uuid, f"{label}: {message}", uncorrected)
    corrected = finite_or_none(gpu.ecc_corrected_errors)
    if corrected is not None and (level := _level(corrected, t.ecc_corrected_errors)):
        message = f"{corrected:.0f} corrected ECC errors"
        yield Alert(level, "ecc_corrected", gpu.index, gpu.uuid, f"{label}: {message}", corrected)
    reasons = gpu.throttle_reasons
    if isinstance(reasons, list):
        worst = max(
            (t.throttle_levels.get(r) for r in reasons if t.throttle_levels.get(r) in LEVELS),
            key=LEVELS.index,
            default=None,
        )
        if worst:
            named = ", ".join(r for r in reasons if r in t.throttle_levels)
            yield Alert(worst, "throttle", gpu.index, gpu.uuid, f"{label}: clocks held back: {named}")


def evaluate(sample: Sample, thresholds: AlertThresholds | None = None) -> list[Alert]:
    """Every threshold ``sample`` crosses, worst first (then by GPU)."""
    t = thresholds or AlertThresholds()
    alerts: list[Alert] = []
    for gpu in sample.gpus:
        alerts.extend(_gpu_alerts(gpu, t))
    alerts.sort(key=lambda a: (-a.rank, a.gpu if a.gpu is not None else -1))
    return alerts


def worst_level(alerts: Iterable[Alert]) -> str:
    """The worst level among ``alerts`` (``ok`` when none)."""
    return max((a.level for a in alerts), key=LEVELS.index, default="ok")


def alert_line(alerts: list[Alert], width: int = 200) -> str:
    """``CRITICAL GPU 1: GPU lost · WARNING GPU 0: 88°C … +2 more`` within ``width`` characters."""
    if not alerts:
        return ""
    parts = [f"{a.level.upper()} {a.message}" for a in alerts]
    text = ""
    for count, part in enumerate(parts):
        candidate = part if not text else f"{text} · {part}"
        rest = len(parts) - count - 1
        tail = f" · +{rest} more" if rest else ""
        if len(candidate) + len(tail) > width and text:
            return f"{text} · +{len(parts) - count} more"
        text = candidate
    return text[:width]


def alert_strings(alerts: Iterable[Alert]) -> list[str]:
    """``["critical gpu_lost GPU 1: GPU lost ..."]``: the form kept in ``Sample.alerts`` (log
    records, JSON lines and CSV): level, kind, then the message, separated by single spaces."""
    return [f"{a.level} {a.kind} {a.message}" for a in alerts]


def annotate(sample: Sample, thresholds: AlertThresholds | None = None) -> list[Alert]:
    """Evaluate ``sample`` and record the result in ``sample.alerts``; returns the alerts."""
    alerts = evaluate(sample, thresholds)
    sample.alerts = alert_strings(alerts)
    return alerts


_EXPORTER_THRESHOLDS: list[AlertThresholds] = []


def exporter_alerts(sample: Sample) -> list[Alert]:
    """The alerts of ``sample`` for the Prometheus exporter (thresholds read once per process)."""
    if not _EXPORTER_THRESHOLDS:
        _EXPORTER_THRESHOLDS.append(load_thresholds()[0])
    return evaluate(sample, _EXPORTER_THRESHOLDS[0])


# --- settings ------------------------------------------------------------------------------------


def thresholds_path() -> Path:
    """``<config dir>/alerts.toml``."""
    return config_dir() / "alerts.toml"


def load_thresholds(path: Path | None = None) -> tuple[AlertThresholds, str | None]:
    """Thresholds from ``path`` (default :func:`thresholds_path`) over the defaults, and a
    one-line problem naming the file and field (or None). A missing file gives the defaults.

    The file holds triples, e.g. ``gpu_temperature_c = [75, 83, 88]``, and a
    ``[throttle_levels]`` table (``sw_power_cap = "warning"``), as declared by
    :class:`gpuscope.schema.alerts.AlertsFile`; it is read bounded like the settings (``/dev/zero``
    costs one chunk). A field that breaks the rules (NaN, a bound out of order, a typo) keeps its
    default and is named in the problem; the other fields still apply."""
    path = path or thresholds_path()
    thresholds = AlertThresholds()
    try:
        data = parse_toml(read_bytes_bounded(path, "settings").decode("utf-8"))
    except FileNotFoundError:
        return thresholds, None
    except OSError as exc:  # unreadable, a directory, too large (/dev/zero, a sparse file)
        return thresholds, f"{path}: cannot read ({exc.strerror or exc}); default alert thresholds used"
    except UnicodeDecodeError as exc:
        return thresholds, f"{path}: not UTF-8 text (byte {exc.start}); default alert thresholds used"
    except TomlSyntaxError as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        return thresholds, f"{where}: not valid TOML ({exc.message}); default alert thresholds used"
    problems: list[str] = []
    for key, value in data.items():  # one field at a time: a bad one keeps its default, the rest apply
        if isinstance(value, list) and any(isinstance(v, float) and math.isnan(v) for v in value):
            problems.append(f"{path}: {key} holds nan; give three numbers (inf: never); ignored")
            continue
        try:
            field_value = getattr(convert({key: value}, AlertsFile, str(path)), key)
        except BadInputError as exc:
            problems.append(f"{exc}; ignored")
            continue
        if key in TRIPLES:
            finite = [bound for bound in field_value if bound != math.inf]  # inf: that level is never raised
            if finite != sorted(finite):
                problems.append(f"{path}: {key} must be increasing [careful, warning, critical] (inf: never); ignored")
                continue
            setattr(thresholds, key, tuple(field_value))
        else:
            levels = {**thresholds.throttle_levels, **field_value}
            thresholds.throttle_levels = {reason: level for reason, level in levels.items() if level != "ok"}
    if not problems:
        return thresholds, None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return thresholds, problems[0] + more
