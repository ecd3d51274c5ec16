"""``gpuscope.profile_generation``: profile a ``transformers`` ``generate()`` call, prefill apart
from the decode steps.

::

    result = gpuscope.profile_generation(model, input_ids, max_new_tokens=32, roofs=["probe.json"])
    print(result.generation.phase("decode").placement.bound)     # "memory"

The whole ``generate()`` call is one step of :class:`gpuscope.profiling.api.Profiler` (warm-up,
one counting step, ``steps`` profiled steps), so the call's groups, verdicts, coverage and energy are
an ordinary profile. Hooks on the model's ``forward`` (a pre-hook and a hook, removed afterwards)
mark each forward call: its first call is the prefill, every later one a decode step, and the ops
between them are ``generate``'s own loop. In the counting step a hook notes the position in the
step's op records at each boundary, so every counted op belongs to one forward call or to the
loop; the profiled steps' ops follow their counted twins. One more run, unprofiled (``timed_runs``),
times each forward call (device synchronised at each boundary) and reads the energy counter at the
start, at the first decode call and at the end: tokens per second and joules per token.

Each run starts from the same RNG state (sampling draws the same tokens in every run, so the runs
run the same ops); the caller's RNG state is restored at the end. torch is imported when it runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuscope.errors import ResourceError, UsageError
from gpuscope.probing.environment import tensor_device
from gpuscope.profiling.api import Profiler
from gpuscope.profiling.build import append_profile
from gpuscope.profiling.generation_result import GenerationPhase, GenerationProfile, GenerationStep
from gpuscope.profiling.record import OpRecord, StepCounter
from gpuscope.profiling.result import ProfileResult, main_dtype
from gpuscope.telemetry.energy import EnergyMeter, EnergyResult
from gpuscope.telemetry.powercap import POWERCAP_ROOT

if TYPE_CHECKING:
    import torch

__all__ = ["profile_built", "profile_generation"]


@dataclass
class _Call:
    """One forward call seen by the hooks."""

    tokens: int
    context: int
    started_s: float = 0.0
    ended_s: float = 0.0
    first: int = 0  # counting step: the records' positions at the boundaries
    last: int = 0


@dataclass
class _Run:
    """What the hooks saw in one generate() run."""

    calls: list[_Call] = field(default_factory=list)
    started_s: float = 0.0
    ended_s: float = 0.0
    energy: list[EnergyResult] = field(default_factory=list)  # prefill window, decode window


class _Hooks:
    """Forward pre-hook and hook on the model: boundaries, token counts, wall times."""

    def __init__(self, synchronize: Callable[[], object]) -> None:
        self.synchronize = synchronize
        self.run: _Run | None = None
        self.position: Callable[[], int] = lambda: 0  # where the counting step's records are
        self.meter: EnergyMeter | None = None

    def pre(self, module: object, args: tuple[object, ...], kwargs: dict[str, Any]) -> None:
        run = self.run
        if run is None:
            return
        tokens, width = _input_tokens(args, kwargs)
        previous = run.calls[-1].context if run.calls else 0
        mask = kwargs.get("attention_mask")
        shape = getattr(mask, "shape", None)
        context = int(shape[-1]) if shape is not None and len(shape) == 2 else previous + width
        self.synchronize()
        call = _Call(tokens=tokens, context=context, started_s=time.perf_counter(), first=self.position())
        if len(run.calls) == 1 and self.meter is not None:  # the first decode call: prefill's window ends
            run.energy.append(self.meter.stop())
            self.meter.start()
        run.calls.append(call)

    def post(self, module: object, args: tuple[object, ...], kwargs: dict[str, Any], output: object) -> None:
        if self.run is None or not self.run.calls:
            return
        self.synchronize()
        call = self.run.calls[-1]
        call.ended_s = time.perf_counter()
        call.last = self.position()


def _position_of(counter: StepCounter | None) -> Callable[[], int]:
    """Where the counting step's records are (0 outside the counting step)."""
    if counter is None:
        return lambda: 0
    return lambda: counter.recorded


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _input_tokens(args: tuple[object, ...], kwargs: Mapping[str, Any]) -> tuple[int, int]:
    """(batch x new positions, new positions) of one forward call, from input_ids or inputs_embeds."""
    value = kwargs.get("input_ids")
    if value is None:
        value = kwargs.get("inputs_embeds")
    if value is None:
        value = kwargs.get("decoder_input_ids")
    if value is None and args:
        value = args[0]
    shape = tuple(getattr(value, "shape", ()) or ())
    if len(shape) >= 2:
        return int(shape[0]) * int(shape[1]), int(shape[1])
    if len(shape) == 1:
        return int(shape[0]), int(shape[0])
    return 0, 0


def profile_generation(
    model: torch.nn.Module,
    inputs: torch.Tensor | Mapping[str, object],
    *,
    max_new_tokens: int = 32,
    generate_kwargs: Mapping[str, object] | None = None,
    name: str | None = None,
    device: str | torch.device | None = None,
    steps: int = 1,
    warmup: int = 1,
    timed_runs: int = 1,
    fixed_length: bool = True,
    roofs: Sequence[str | os.PathLike[str]] = (),
    results: str | os.PathLike[str] | None = None,
    energy: bool = True,
    powercap_root: str | os.PathLike[str] = POWERCAP_ROOT,
    telemetry: bool = True,
) -> ProfileResult:
    """Profile ``model.generate(inputs, max_new_tokens=..., **generate_kwargs)`` (``inputs``: the
    prompt's ``input_ids``, or a mapping of keyword arguments such as a tokenizer's output).

    Runs ``warmup`` plain calls, one counting call, ``steps`` profiled calls and ``timed_runs``
    unprofiled calls (seconds, joules). ``fixed_length``: every call makes ``max_new_tokens`` tokens
    (``min_new_tokens`` is set to it unless given), so the runs run the same steps. Returns the
    profile of the whole call with :attr:`ProfileResult.generation`
    (:class:`~gpuscope.profiling.generation_result.GenerationProfile`):
    the prefill, the decode steps and the loop's own ops, each with FLOPs, bytes, time, tokens per
    second, joules per token (or why not) and a roofline placement. ``results``: a results file the
    profile is appended to. The model's hooks are removed and the RNG state restored afterwards."""
    import torch

    if not callable(getattr(model, "generate", None)):
        raise UsageError(f"profile_generation: {type(model).__name__} has no generate() method")
    if max_new_tokens < 2:
        raise UsageError(f"max_new_tokens={max_new_tokens}: at least 2 (one prefill and one decode step)")
    if timed_runs < 1:
        raise UsageError(f"timed_runs={timed_runs}: at least 1")
    call_kwargs: dict[str, object] = dict(inputs) if isinstance(inputs, Mapping) else {"input_ids": inputs}
    call_kwargs.update(generate_kwargs or {})
    call_kwargs["max_new_tokens"] = max_new_tokens
    if fixed_length:  # every run makes max_new_tokens: an end-of-sequence token drawn early does not end it
        call_kwargs.setdefault("min_new_tokens", max_new_tokens)
    if device is None:
        device = tensor_device(call_kwargs) or next((p.device for p in model.parameters()), None)
    resolved = torch.device(device if device is not None else "cpu")

    def synchronize() -> None:
        if resolved.type == "cuda":
            torch.cuda.synchronize(resolved)

    cpu_state = torch.get_rng_state()
    cuda_state = torch.cuda.get_rng_state(resolved) if resolved.type == "cuda" else None

    def generate() -> object:
        torch.set_rng_state(cpu_state)  # every run draws the same numbers: the same tokens, the same ops
        if cuda_state is not None:
            torch.cuda.set_rng_state(cuda_state, resolved)
        return model.generate(**call_kwargs)  # type: ignore[operator]

    hooks = _Hooks(synchronize)
    handles = [
        model.register_forward_pre_hook(hooks.pre, with_kwargs=True),
        model.register_forward_hook(hooks.post, with_kwargs=True),
    ]
    label = name or f"{type(model).__name__}.generate({max_new_tokens} new tokens)"
    profiler = Profiler(label, resolved, steps=steps, warmup=warmup, roofs=roofs, results=None, energy=energy,
                        powercap_root=powercap_root, rerun=generate, telemetry=telemetry)  # fmt: skip
    runs: dict[str, list[_Run]] = {"count": [], "profile": [], "timed": []}
    try:
        for _ in range(profiler.steps_needed):
            phase = profiler.phase
            hooks.run = _Run()
            with profiler:
                counter = profiler.counting_step  # None outside the counting step
                hooks.position = _position_of(counter)
                generate()
            if phase in runs:
                runs[phase].append(hooks.run)
        hooks.position = lambda: 0
        meter = EnergyMeter(str(resolved) if resolved.type == "cuda" else "cpu", powercap_root=powercap_root)
        try:
            for _ in range(timed_runs):
                hooks.run, hooks.meter = _Run(), (meter if energy else None)
                synchronize()
                if energy:
                    meter.start()
                hooks.run.started_s = time.perf_counter()
                generate()
                synchronize()
                hooks.run.ended_s = time.perf_counter()
                if energy:
                    hooks.run.energy.append(meter.stop())
                runs["timed"].append(hooks.run)
        finally:
            meter.close()
    except BaseException:
        profiler.discard()
        raise
    finally:
        hooks.run, hooks.meter = None, None
        for handle in handles:
            handle.remove()
        torch.set_rng_state(cpu_state)
        if cuda_state is not None:
            torch.cuda.set_rng_state(cuda_state, resolved)
    result = profiler.result
    counted = profiler.counted
    if result is None or counted is None:  # pragma: no cover - the loop runs every phase
        raise ResourceError("profile_generation: the profile did not complete")
    result.generation = _generation(result, counted.records, runs, profiler.step_events, call_kwargs)
    if results is not None:
        append_profile(os.path.abspath(results), result)
        result.results_path = str(results)
    return result


def _generation(
    result: ProfileResult,
    records: list[OpRecord],
    runs: dict[str, list[_Run]],
    step_events: Sequence[Any],
    call_kwargs: Mapping[str, object],
) -> GenerationProfile:
    counted = runs["count"][0]
    calls = counted.calls
    notes: list[str] = []
    if not calls:
        raise ResourceError("profile_generation: generate() never called the model's forward (no hooks fired)")
    shapes = {len(run.calls) for phase in runs.values() for run in phase}
    if len(shapes) > 1:
        notes.append(
            f"the runs made different numbers of forward calls ({sorted(shapes)}): ops were matched by order, "
            "the per-step split may be off (set min_new_tokens=max_new_tokens)"
        )
    # each counted op: its forward call (index) or the loop (-1)
    owner: dict[int, int] = {}
    for index, call in enumerate(calls):
        for record in records[call.first : call.last]:
            owner[id(record)] = index
    n_calls = len(calls)
    flops = [0] * (n_calls + 1)  # the last slot: the loop
    nbytes = [0] * (n_calls + 1)
    loop_calls = 0
    for record in records:
        slot = owner.get(id(record), n_calls)
        flops[slot] += record.flops
        nbytes[slot] += record.bytes
        loop_calls += slot == n_calls
    ops_s = [0.0] * (n_calls + 1)
    for step in step_events:  # profiled steps: each op follows its counted twin (an unmatched one its neighbour)
        slot = n_calls
        for op in step.ops:
            if op.record is not None:
                slot = owner.get(id(op.record), n_calls)
            ops_s[slot] += op.time_s / max(len(step_events), 1)
    timed = runs["timed"]
    call_s = [_mean([run.calls[i].ended_s - run.calls[i].started_s for run in timed if len(run.calls) > i])
              for i in range(n_calls)]  # fmt: skip
    total_s = _mean([run.ended_s - run.started_s for run in timed])
    ttft_s = _mean([run.calls[1].started_s - run.started_s for run in timed if len(run.calls) > 1])
    decode_window_s = _mean([run.ended_s - run.calls[1].started_s for run in timed if len(run.calls) > 1])
    steps = [
        GenerationStep(index=i, kind="prefill" if i == 0 else "decode", tokens=call.tokens, context=call.context,
                       time_s=call_s[i], ops_s=ops_s[i], flops=flops[i], bytes=nbytes[i])
        for i, call in enumerate(calls)
    ]  # fmt: skip
    batch = max(calls[0].tokens // max(calls[0].context, 1), 1) if calls[0].context else 1
    prompt_ids = call_kwargs.get("input_ids")
    prompt_shape = tuple(getattr(prompt_ids, "shape", ()) or ())
    if len(prompt_shape) == 2:
        batch = int(prompt_shape[0])
    decode_steps = steps[1:]
    decode_tokens = sum(step.tokens for step in decode_steps)
    energy_windows = [run.energy for run in timed if len(run.energy) == 2]  # prefill, decode
    prefill = GenerationPhase(
        kind="prefill", calls=1, tokens=steps[0].tokens, time_s=steps[0].time_s, ops_s=steps[0].ops_s,
        flops=steps[0].flops, bytes=steps[0].bytes, window_s=ttft_s or None,
        tokens_per_s=steps[0].tokens / steps[0].time_s if steps[0].time_s > 0 else None,
        energy=_mean_energy([windows[0] for windows in energy_windows]),
    )  # fmt: skip
    decode_s = sum(step.time_s for step in decode_steps)
    decode = GenerationPhase(
        kind="decode", calls=len(decode_steps), tokens=decode_tokens, time_s=decode_s,
        ops_s=sum(step.ops_s for step in decode_steps), flops=sum(step.flops for step in decode_steps),
        bytes=sum(step.bytes for step in decode_steps), window_s=decode_window_s or None,
        tokens_per_s=decode_tokens / decode_window_s if decode_window_s > 0 else None,
        energy=_mean_energy([windows[1] for windows in energy_windows]),
    )  # fmt: skip
    loop = GenerationPhase(
        kind="loop", calls=loop_calls, tokens=0, time_s=max(total_s - sum(call_s), 0.0), ops_s=ops_s[n_calls],
        flops=flops[n_calls], bytes=nbytes[n_calls],
    )  # fmt: skip
    whole: EnergyResult | None = None
    if prefill.energy is not None and decode.energy is not None:  # the whole call: both windows
        whole = _sum_energy(prefill.energy, decode.energy)
    elif timed and timed[0].energy:
        whole = timed[0].energy[-1]
    generation = GenerationProfile(
        batch=batch, prompt_tokens=steps[0].tokens // max(batch, 1), new_tokens=n_calls, time_s=total_s,
        timed_runs=len(timed), phases=[prefill, decode, loop], steps=steps, energy=whole, notes=notes,
    )  # fmt: skip
    generation.place(result.name, result.device_key, result.device_roofs, main_dtype(result.groups))
    return generation


def _mean_energy(results: list[EnergyResult]) -> EnergyResult | None:
    if not results:
        return None
    from gpuscope.telemetry.values import Unavailable

    available = [r for r in results if not isinstance(r.joules, Unavailable)]
    if not available:
        return results[0]
    joules = sum(r.joules for r in available if not isinstance(r.joules, Unavailable)) / len(available)
    return EnergyResult(joules, sum(r.window_s for r in available) / len(available), available[0].method)


def _sum_energy(first: EnergyResult, second: EnergyResult) -> EnergyResult:
    from gpuscope.telemetry.values import Unavailable

    if isinstance(first.joules, Unavailable):
        return first
    if isinstance(second.joules, Unavailable):
        return second
    return EnergyResult(first.joules + second.joules, first.window_s + second.window_s, first.method)


def profile_built(built: object, *, max_new_tokens: int, **options: Any) -> ProfileResult:
    """:func:`profile_generation` of what a ``gpuscope profile --generate N`` target returned:
    ``(model, inputs)`` or ``(model, inputs, generate_kwargs)``; ``options`` as for
    :func:`profile_generation` (``steps`` defaults to 1 there, the command passes ``--steps``)."""
    if not isinstance(built, (tuple, list)) or len(built) not in (2, 3):
        raise UsageError(
            f"--generate: the target returned {type(built).__name__}; it must return (model, inputs) or "
            "(model, inputs, generate_kwargs)"
        )
    model, inputs = built[0], built[1]
    generate_kwargs = built[2] if len(built) == 3 else None
    if generate_kwargs is not None and not isinstance(generate_kwargs, Mapping):
        raise UsageError("--generate: the target's third value must be a dict of generate() keyword arguments")
    return profile_generation(model, inputs, max_new_tokens=max_new_tokens, generate_kwargs=generate_kwargs,
                              **options)  # fmt: skip
