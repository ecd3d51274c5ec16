"""Text views of a profile: the summary, the top groups by time lost (fits 80 columns), the module
totals and the roofline with each group as a point. No Textual, no torch."""

from __future__ import annotations

from gpuscope.profiling.attribution import OpGroup
from gpuscope.profiling.result import ProfileResult
from gpuscope.profiling.view import format_ms, group_numbers, group_point, short_bound
from gpuscope.roofline.columns import distinct_cuts
from gpuscope.roofline.model import RooflineModel
from gpuscope.roofline.paint_text import DEFAULT_PALETTE, MONOCHROME_PALETTE, render_roofline
from gpuscope.roofline.tables import format_table
from gpuscope.roofline.units import format_count, format_si
from gpuscope.telemetry.values import Unavailable

__all__ = [
    "chart_model",
    "coverage_line",
    "energy_line",
    "step_verdict_line",
    "unknown_groups",
    "module_table",
    "render_chart",
    "summary_lines",
    "top_table",
]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def _short_module(path: str, width: int) -> str:
    """The trailing parts of a module path that fit: ``layers.0.self_attn`` -> ``…0.self_attn``."""
    if not path:
        return "-"
    if len(path) <= width:
        return path
    parts = path.split(".")
    tail = parts[-1]
    for part in reversed(parts[:-1]):
        if len(part) + 1 + len(tail) + 1 > width:
            break
        tail = f"{part}.{tail}"
    return _cut("…" + tail, width)


def energy_line(result: ProfileResult) -> str:
    """``energy  3.2 J/step (...), 1.4 GFLOP/J`` or ``energy  unavailable: no powercap interface``."""
    energy = result.energy
    if energy is None:
        return "energy    not measured"
    if isinstance(energy.joules, Unavailable):
        return f"energy    unavailable: {energy.joules.detail or energy.joules.reason.value}"
    ratio = result.flop_per_j
    per_j = format_si(ratio, "FLOP/J") if isinstance(ratio, float) else "-"
    return f"energy    {format_si(energy.joules, 'J')} per step, {per_j} ({energy.method})"


def coverage_line(result: ProfileResult) -> str:
    """``coverage  99.2% of op time has known FLOPs or moves data; 0.4 ms FLOPs unknown``: the share
    of the ops' time with a known FLOP count or genuine data movement (:attr:`ProfileResult.coverage`)."""
    coverage = result.coverage
    if coverage is None:
        return "  coverage  - (no op time measured)"
    return (
        f"  coverage  {coverage * 100:.1f}% of op time has known FLOPs or moves data; "
        f"{format_ms(result.unknown_s)} ms FLOPs unknown"
    )


def step_verdict_line(result: ProfileResult) -> str:
    """The whole step as one point: ``verdict   memory-bound: 0.5 FLOP/B, 19 GB/s = 83% of dram.triad``."""
    placement = result.step_placement()
    if placement is None or placement.bound == "unknown" or placement.efficiency is None:
        why = placement.note if placement is not None and placement.note else "no roofs"
        return f"  verdict   none for the whole step ({why})"
    roof = placement.bounding_roof
    intensity = placement.intensity_flop_per_byte
    x = "-" if intensity is None else f"{intensity:.3g}"
    if placement.bound == "memory" and roof is not None:
        rate = format_si(result.bytes_total / result.step_s, "B/s") if result.step_s else "-"
        if placement.intensity_basis != "counted bytes":
            rate = format_si((placement.efficiency or 0.0) * roof.value, "B/s")
    else:
        rate = format_si(result.flops / result.step_s if result.step_s else None, "FLOP/s")
    name = roof.name if roof is not None else "roof"
    return (
        f"  verdict   whole step {placement.bound}-bound: {x} FLOP/B, {rate} = "
        f"{placement.efficiency * 100:.0f}% of the {name} roof"
    )


def unknown_groups(result: ProfileResult) -> list[OpGroup]:
    """The groups whose FLOPs are unknown (verdict ``unknown``), most time first."""
    return sorted((group for group in result.groups if not group.flops_known), key=lambda group: -group.time_s)


def summary_lines(result: ProfileResult, width: int = 80) -> list[str]:
    """What the step did: time, where it went, FLOPs, bytes, energy, roofs; lines wrapped at
    ``width``."""
    in_ops = result.in_ops_share
    lines = [
        f"{result.name} on {result.device}{f' ({result.device_name})' if result.device_name else ''}",
        f"  step      {format_si(result.step_s, 's')}, mean of {result.steps} profiled "
        f"(skipped: {result.warmup} warm-up, 1 counting)",
        (
            f"  in ops    {format_si(result.ops_s, 's')} = {in_ops * 100:.1f}% of the step "
            f"({result.time_basis}); outside ops {format_si(result.outside_ops_s, 's')}"
            if in_ops is not None
            else "  in ops    -"
        ),
        coverage_line(result),
        (
            f"  FLOPs     {format_count(result.flop_counter_total)} (FlopCounterMode) + "
            f"{format_count(result.pointwise_flops)} pointwise"
            f" = {format_si(result.flops / result.step_s if result.step_s else None, 'FLOP/s')}"
        ),
        f"  bytes     {format_si(result.bytes_total, 'B')} per step (sum of per-op lower bounds)",
        "  " + energy_line(result),
    ]
    dram = result.dram_bytes_measured
    if not isinstance(dram, Unavailable):
        lines.append(f"  DRAM      {format_si(dram, 'B')} moved per step (GPM)")
    lines.append(f"  {result.roofs}")
    lines.append(step_verdict_line(result))
    lost = result.time_lost_s
    if result.step_s > 0 and any(v.time_lost_s is not None for v in result.verdicts):
        lines.append(f"  lost      {format_si(lost, 's')} to the roofs ({lost / result.step_s * 100:.0f}% of the step)")
    unknown = unknown_groups(result)
    if unknown:
        listed = ", ".join(f"{group.label} {format_ms(group.time_s)} ms" for group in unknown[:4])
        more = f" and {len(unknown) - 4} more" if len(unknown) > 4 else ""
        lines.append(f"  unknown   no FLOP count, no verdict: {listed}{more}")
    if result.compiled is not None:  # torch.compile'd code ran (gpuscope.profiling.compiled_attribution)
        from gpuscope.profiling.compiled_attribution import compiled_lines

        lines.extend(compiled_lines(result.compiled))
    if result.generation is not None:  # a generate() call: prefill, decode, loop (gpuscope.profiling.generation)
        from gpuscope.profiling.generation_result import generation_lines

        lines.extend(generation_lines(result.generation))
    for note in result.notes:
        lines.append(f"  note: {note}")
    if result.results_path:
        lines.append(f"  appended to {result.results_path}")
    return _wrap(lines, width)


def _wrap(lines: list[str], width: int) -> list[str]:
    import textwrap

    wrapped: list[str] = []
    for line in lines:
        if len(line) <= width:
            wrapped.append(line)
            continue
        indent = " " * (12 if line.startswith("  ") and line[2:3] != " " else 4)
        wrapped.extend(
            textwrap.wrap(line, width=width, subsequent_indent=indent, break_on_hyphens=False) or [line[:width]]
        )
    return wrapped


def top_table(result: ProfileResult, limit: int = 10, width: int = 80) -> list[str]:
    """The groups that lose the most time to their roof (then the slowest without a verdict),
    one line each, at most ``width`` columns."""
    verdicts = result.verdicts[:limit]
    step = result.step_s or 1.0
    headers = ["#", "op dtype shapes", "module", "bnd", "ms", "step", "eff", "lost", "gain"]
    numbers = 2 + 3 + 5 + 4 + 4 + 5 + 5 + 8 * 2  # usual widths of "#", bnd, ms, step, eff, lost, gain and the gaps
    module_width = max(6, min(12, (width - numbers) // 3))
    rows = []
    for rank, verdict in enumerate(verdicts, 1):
        group = verdict.group
        rows.append(
            [
                str(rank),
                group.label,
                _short_module(group.modules[0] if group.modules else "", module_width),
                short_bound(verdict.bound),
                *group_numbers(group.time_s, step, verdict.efficiency, verdict.time_lost_s, verdict.step_speedup),
            ]
        )
    # the name gets what the other columns (as wide as their widest cell) leave: slow steps
    # write wider numbers, and the header must still fit
    others = sum(
        max([len(header)] + [len(row[index]) for row in rows]) for index, header in enumerate(headers) if index != 1
    )
    name_width = max(12, width - others - 2 * (len(headers) - 1))
    for row, name in zip(rows, distinct_cuts([row[1] for row in rows], name_width), strict=True):
        row[1] = name  # names cut alike keep their last words (the one column rule)
    lines = format_table(headers, rows, width=width)
    lines.append(_cut("ms: device time per step; step: share of the step; eff: time at roof / time", width))
    lines.append(_cut("lost: ms above the roof; gain: step speed-up if this row reached its roof", width))
    for rank, verdict in enumerate(verdicts, 1):  # compiled kernels: the eager ops each one holds
        if verdict.group.fused:
            lines.append(_cut(f"{rank}: a compiled kernel holding {', '.join(verdict.group.fused)}", width))
    return lines


def module_table(result: ProfileResult, depth: int = 1, width: int = 80, limit: int = 12) -> list[str]:
    """Module totals down to ``depth`` levels below the root (submodules included), most time first."""
    modules = [m for m in result.modules if m.depth <= depth]
    modules.sort(key=lambda m: -m.time_s)
    step = result.step_s or 1.0
    rows = [
        [
            _cut(m.path, max(20, width - 40)),
            format_ms(m.time_s),
            f"{m.time_s / step * 100:.0f}%",
            format_count(m.flops),
            format_si(m.bytes, "B"),
        ]
        for m in modules[:limit]
    ]
    return format_table(["module", "ms", "step", "FLOPs", "bytes"], rows, width=width)


def chart_model(result: ProfileResult, limit: int = 10) -> RooflineModel | None:
    """A :class:`RooflineModel` with the roofs of the profiled device and the top ``limit`` groups
    of :func:`top_table` as points, in the table's order, so a point's number on the chart is its
    ``#`` in the table (groups without FLOPs are not drawn but keep their number). None without
    roofs. Every roofline painter (terminal, TUI, report SVG) takes this model."""
    if result.device_roofs is None or result.device_key is None:
        return None
    step_s = result.step_s or 1.0
    points, key = [], result.device_key
    for group in (verdict.group for verdict in result.verdicts[:limit]):
        name = f"{group.op.split('::')[-1]} ({group.time_s / step_s * 100:.0f}% of step)"
        points.append(group_point(name, key, float(group.flops), float(group.bytes), group.time_s, group.dtype))
    model = RooflineModel(devices=[result.device_roofs], sources=["profile"])
    return model.replace_points(points)


def render_chart(result: ProfileResult, width: int = 80, height: int = 22, color: bool = False, limit: int = 10) -> str:
    """The roofline with the table's top groups as numbered points (plotext text)."""
    model = chart_model(result, limit)
    if model is None:
        return "no roofs for this device: no chart"
    if not any(v.group.flops > 0 and v.group.bytes > 0 for v in result.verdicts[:limit]):
        return "no op with both FLOPs and bytes: nothing to place"
    palette = DEFAULT_PALETTE if color else MONOCHROME_PALETTE
    return render_roofline(
        model,
        width=width,
        height=height,
        palette=palette,
        title=_cut(f"{result.name}: point n = row n of the table", width - 4),
    )
