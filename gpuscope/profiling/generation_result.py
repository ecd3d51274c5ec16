"""What a profile of a ``generate()`` call adds to its :class:`~gpuscope.profiling.result.ProfileResult`:
the prefill, the decode steps and the loop's own ops, each as a roofline point, with tokens per second
and joules per token (:mod:`gpuscope.profiling.generation` measures them). No torch.

Definitions (per ``generate()`` call; ``docs/profile.md``, "Generation"):

- **prefill**: the model's first forward call (the prompt into an empty cache);
- **decode**: every later forward call (one new token per sequence against the cache);
- **loop**: the ops ``generate`` runs outside the model's forward calls (logits processors,
  ``argmax``/sampling, stopping criteria, ``isin`` on the end-of-sequence ids, the output ``cat``).

FLOPs and bytes are the counting step's (exact per call). Times are the wall time of an unprofiled
timed run (hooks on the model's forward, the device synchronised at each boundary); ``ops_s`` is the
ops' device time in the profiled steps (profiler overhead included). Tokens per second: prefill =
prompt tokens / prefill forward time; decode = decoded tokens / time from the first decode forward
to the end of ``generate`` (its loop ops included, as a user waits for them); generate = new tokens
/ the whole call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuscope.profiling.stored import read_generation
from gpuscope.roofline.model import DeviceKey, DeviceRoofs, Placement, Point, RooflineModel, place_point
from gpuscope.roofline.units import format_si
from gpuscope.telemetry.energy import EnergyResult
from gpuscope.telemetry.records import JsonObject
from gpuscope.telemetry.values import Unavailable

__all__ = [
    "GenerationPhase",
    "GenerationProfile",
    "GenerationStep",
    "generation_chart_model",
    "generation_lines",
    "generation_text",
    "render_generation_chart",
]


@dataclass
class GenerationStep:
    """One forward call of the model inside ``generate()``."""

    index: int
    kind: str  # "prefill" | "decode"
    tokens: int  # tokens this call processed: batch x new positions
    context: int  # positions in the cache after the call (per sequence)
    time_s: float  # wall time, unprofiled timed run (mean over the timed runs)
    ops_s: float  # ops' device time in the profiled steps (mean)
    flops: int
    bytes: int

    def to_json(self) -> JsonObject:
        return {
            "index": self.index, "kind": self.kind, "tokens": self.tokens, "context": self.context,
            "time_s": self.time_s, "ops_s": self.ops_s, "flops": self.flops, "bytes": self.bytes,
        }  # fmt: skip


@dataclass
class GenerationPhase:
    """Prefill, decode (all decode steps together) or the loop's own ops, per ``generate()`` call."""

    kind: str  # "prefill" | "decode" | "loop"
    calls: int  # forward calls (loop: op calls)
    tokens: int  # tokens processed (prefill) or produced (decode); 0 for the loop
    time_s: float  # wall time of the phase's forward calls (loop: generate's time outside them)
    ops_s: float  # ops' device time in the profiled steps
    flops: int
    bytes: int
    window_s: float | None = None  # the tokens/s window (prefill: first token; decode: to the end)
    tokens_per_s: float | None = None
    energy: EnergyResult | None = None  # over ``window_s`` (None: not measured)
    placement: Placement | None = None  # the phase as one roofline point

    @property
    def intensity_flop_per_byte(self) -> float | None:
        return self.flops / self.bytes if self.bytes else None

    @property
    def j_per_token(self) -> float | Unavailable | None:
        if self.energy is None or not self.tokens:
            return None
        if isinstance(self.energy.joules, Unavailable):
            return self.energy.joules
        return self.energy.joules / self.tokens

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "kind": self.kind, "calls": self.calls, "tokens": self.tokens, "time_s": self.time_s,
            "ops_s": self.ops_s, "flops": self.flops, "bytes": self.bytes,
            "intensity_flop_per_byte": self.intensity_flop_per_byte, "window_s": self.window_s,
            "tokens_per_s": self.tokens_per_s,
        }  # fmt: skip
        out.update(_energy_json(self.energy, self.j_per_token))
        placement = self.placement
        if placement is not None and placement.bound != "unknown":
            roof = placement.bounding_roof
            out.update(bound=placement.bound, efficiency=placement.efficiency, roof=roof.name if roof else None)
        return {key: value for key, value in out.items() if value is not None}


@dataclass
class GenerationProfile:
    """Prefill against decode in one ``generate()`` call (per call; see the module docstring)."""

    batch: int
    prompt_tokens: int  # per sequence
    new_tokens: int  # per sequence
    time_s: float  # the whole generate() call, unprofiled (mean over the timed runs)
    timed_runs: int
    phases: list[GenerationPhase]
    steps: list[GenerationStep]
    energy: EnergyResult | None = None  # the whole call
    notes: list[str] = field(default_factory=list)
    dtype: str | None = None  # the dtype the phases were placed with (the profile's main one), set by place()

    def phase(self, kind: str) -> GenerationPhase | None:
        return next((phase for phase in self.phases if phase.kind == kind), None)

    @property
    def tokens_per_s(self) -> float | None:
        """New tokens (all sequences) per second of the whole call."""
        return self.batch * self.new_tokens / self.time_s if self.time_s > 0 else None

    @property
    def j_per_token(self) -> float | Unavailable | None:
        """Joules per new token of the whole call (energy unavailable: why)."""
        if self.energy is None or not self.new_tokens:
            return None
        if isinstance(self.energy.joules, Unavailable):
            return self.energy.joules
        return self.energy.joules / (self.batch * self.new_tokens)

    def place(self, name: str, key: DeviceKey | None, roofs: DeviceRoofs | None, dtype: str | None) -> None:
        """Place each phase as one roofline point against ``roofs`` (the profile's), with the compute
        roof of ``dtype``."""
        self.dtype = dtype
        for phase in self.phases:
            if roofs is None or key is None or phase.time_s <= 0 or not (phase.flops or phase.bytes):
                continue
            point = Point(
                name=f"{name} {phase.kind}", key=key, flops=float(phase.flops), bytes=float(phase.bytes),
                time_s=phase.time_s, dtype=dtype, source="profile", warm=True,
            )  # fmt: skip
            phase.placement = place_point(point, roofs)

    def to_json(self) -> JsonObject:
        """The ``generation`` object of the stored profile (``docs/results-schema.md``)."""
        out: JsonObject = {
            "batch": self.batch, "prompt_tokens": self.prompt_tokens, "new_tokens": self.new_tokens,
            "forward_calls": len(self.steps), "time_s": self.time_s, "timed_runs": self.timed_runs,
            "tokens_per_s": self.tokens_per_s, "dtype": self.dtype,
        }  # fmt: skip
        out.update(_energy_json(self.energy, self.j_per_token))
        out["phases"] = [phase.to_json() for phase in self.phases]
        out["steps"] = [step.to_json() for step in self.steps]
        if self.notes:
            out["notes"] = list(self.notes)
        return {key: value for key, value in out.items() if value is not None}


def _energy_json(energy: EnergyResult | None, per_token: float | Unavailable | None) -> JsonObject:
    if energy is None:
        return {}
    if isinstance(energy.joules, Unavailable):
        return {"energy_unavailable": energy.joules.to_json(), "j_per_token_unavailable": energy.joules.to_json()}
    return {
        "energy_j": energy.joules,
        "energy_window_s": energy.window_s,
        "j_per_token": None if isinstance(per_token, Unavailable) else per_token,
    }


def _energy_text(energy: EnergyResult | None, per_token: float | Unavailable | None) -> str:
    if energy is None:
        return ""
    if isinstance(per_token, Unavailable):  # the J/token line says why
        return ""
    return "" if per_token is None else f"{format_si(per_token, 'J')}/token"


def _placement_text(phase: GenerationPhase) -> str:
    placement = phase.placement
    intensity = phase.intensity_flop_per_byte
    at = "" if intensity is None else f"{intensity:.3g} FLOP/B"
    if placement is None or placement.bound == "unknown":
        return f"{at}, bound unknown (no roofs)" if at else "bound unknown (no roofs)"
    roof = placement.bounding_roof
    name = roof.name if roof else ""
    share = "" if placement.efficiency is None else f", {placement.efficiency * 100:.0f}% of the {name} roof"
    return f"{placement.bound}-bound, {at}{share}"


def generation_lines(generation: GenerationProfile) -> list[str]:
    """The summary lines of a generation profile (CLI and ``render.summary_lines``)."""
    decode = generation.phase("decode")
    prefill = generation.phase("prefill")
    loop = generation.phase("loop")
    calls = len(generation.steps)
    tps = generation.tokens_per_s
    lines = [
        f"  generate  {generation.new_tokens} new tokens x batch {generation.batch} after a "
        f"{generation.prompt_tokens}-token prompt: {format_si(generation.time_s, 's')}"
        + (f", {tps:.4g} tokens/s" if tps else "")
        + f" (1 prefill + {max(calls - 1, 0)} decode forward calls, unprofiled)"
    ]
    per_token = generation.j_per_token
    if isinstance(per_token, Unavailable):
        lines.append(f"  J/token   unavailable, because {per_token.detail or per_token.reason}")
    elif per_token is not None:
        lines.append(f"  J/token   {format_si(per_token, 'J')} per new token")
    for phase in (prefill, decode):
        if phase is None:
            continue
        what = f"{phase.tokens} tokens" if phase.kind == "prefill" else f"{phase.calls} steps"
        speed = f", {phase.tokens_per_s:.4g} tokens/s" if phase.tokens_per_s else ""
        energy = _energy_text(phase.energy, phase.j_per_token)
        lines.append(
            f"  {phase.kind:<9} {what}, {format_si(phase.time_s, 's')}{speed}; {format_si(phase.flops, 'FLOP')}, "
            f"{format_si(phase.bytes, 'B')}: {_placement_text(phase)}" + (f"; {energy}" if energy else "")
        )
    if loop is not None and loop.calls:
        lines.append(
            f"  loop      generate's own ops: {loop.calls} calls, {format_si(loop.time_s, 's')} outside forward "
            f"calls, {format_si(loop.flops, 'FLOP')}, {format_si(loop.bytes, 'B')}"
        )
    for note in generation.notes:
        lines.append(f"  note: {note}")
    return lines


def generation_text(generation: object) -> str:
    """One sentence of a stored profile's ``generation`` object (the report): tokens per second, the
    prefill's and decode's verdicts, joules per token or why not; ``""`` when there is none."""
    stored = read_generation(generation)
    if stored is None:
        return ""
    tps = stored.tokens_per_s
    parts = [
        f"generate(): {_count(stored.new_tokens)} new tokens x batch {_count(stored.batch)} after a "
        f"{_count(stored.prompt_tokens)}-token prompt"
        + (f", {format_si(tps, '', 4)} tokens/s" if tps is not None else "")
    ]
    for kind in ("prefill", "decode"):
        phase = stored.phase(kind)
        if phase is None:
            continue
        intensity = phase.intensity_flop_per_byte
        at = f"{intensity:.3g} FLOP/B" if intensity is not None else "bytes unknown"
        efficiency = phase.efficiency
        verdict = (
            f"{phase.bound}-bound ({at}, {efficiency * 100:.0f}% of the {phase.roof} roof)"
            if phase.bound and efficiency is not None
            else f"no verdict ({at})"
        )
        speed = phase.tokens_per_s
        parts.append(f"{kind} {verdict}" + (f", {format_si(speed, '', 4)} tokens/s" if speed is not None else ""))
    if stored.j_per_token is not None:
        parts.append(f"{format_si(stored.j_per_token, 'J')}/token")
    elif stored.j_per_token_unavailable:
        parts.append(f"J/token unavailable ({stored.j_per_token_unavailable})")
    return "; ".join(parts)


def _count(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def generation_chart_model(
    generation: GenerationProfile, key: DeviceKey | None, roofs: DeviceRoofs | None
) -> RooflineModel | None:
    """A :class:`RooflineModel` with the profile's roofs and two points, ``prefill`` and ``decode``
    (the places :meth:`GenerationProfile.place` judged); None without roofs."""
    if roofs is None or key is None:
        return None
    points = [
        phase.placement.point
        for phase in (generation.phase("prefill"), generation.phase("decode"))
        if phase is not None and phase.placement is not None and phase.flops > 0 and phase.bytes > 0
    ]
    if not points:
        return None
    return RooflineModel(devices=[roofs], sources=["profile"]).replace_points(points)


def render_generation_chart(
    generation: GenerationProfile,
    key: DeviceKey | None,
    roofs: DeviceRoofs | None,
    *,
    width: int = 80,
    height: int = 18,
    color: bool = False,
) -> str:
    """The roofline with the prefill and decode as points 1 and 2 (plotext text)."""
    from gpuscope.roofline.paint_text import DEFAULT_PALETTE, MONOCHROME_PALETTE, render_roofline

    model = generation_chart_model(generation, key, roofs)
    if model is None:
        return "generation: no roofs for this device, or no phase with FLOPs and bytes: no chart"
    palette = DEFAULT_PALETTE if color else MONOCHROME_PALETTE
    title = "generate(): point 1 = prefill, point 2 = decode"
    return render_roofline(model, width=width, height=height, palette=palette, title=title[: max(width - 4, 10)])
