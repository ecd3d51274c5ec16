"""The report's "Where the time goes" section: for each profile in the report's results files, the
step summary, the groups losing the most time to their roofs, the module totals and the roofline
of the groups (SVG, the same painter as the report's roofline); then the energy of every workload
that carries it, with the energy roofline when probe ceilings carry energy.

A pure function of the report document (the results documents it embeds). HTML is escaped here;
charts come from :func:`gpuscope.report.charts.roofline_svg`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from gpuscope.profiling.energy_roofline import EnergyRoofs, attainable_flop_per_j, energy_roofs_from_ceilings
from gpuscope.profiling.stored import (
    Profiled,
    StoredGroup,
    StoredPhase,
    StoredProfile,
    profiled_workloads,
    read_compare_eager,
    read_generation,
)
from gpuscope.profiling.view import (
    COMPARE_HEADERS,
    compare_rows,
    compiled_text,
    coverage_text,
    flops_unknown,
    format_ms,
    generation_dtype,
    generation_phases,
    group_numbers,
)
from gpuscope.report.charts import roofline_svg
from gpuscope.report.html_blocks import escape_text as _e
from gpuscope.report.html_blocks import table_html
from gpuscope.report.tables import Table
from gpuscope.roofline.units import format_intensity, format_si
from gpuscope.schema.report import EmbeddedResults, Point, Roofline
from gpuscope.schema.results import Workload

__all__ = ["energy_section_html", "profile_markdown_lines", "profile_section_html", "profiles_of"]

TOP_GROUPS = 10


def profiles_of(results: Sequence[EmbeddedResults]) -> list[tuple[str, Profiled]]:
    """(source label, profile workload) for every profile workload of the report's results."""
    return [(str(entry.label), profiled) for entry in results for profiled in profiled_workloads(entry.document)]


def _table(headers: list[str], rows: list[list[str]], numeric: set[int], table_id: str, title: str) -> str:
    table = Table(table_id, title, headers, numeric=numeric)
    for row in rows:
        table.add(row)
    return table_html(table)


def _energy_text(workload: Workload) -> str:
    joules = workload.energy_j
    if joules is not None and joules > 0:
        return f"{format_si(joules, 'J')} per step, {format_si(workload.flop_per_j, 'FLOP/J')}"
    return f"unavailable ({workload.energy_unavailable or 'not measured'})"


def _step_verdict_text(profile: StoredProfile) -> str:
    """The whole step as one point: which roof bounds it and how close it runs to it."""
    efficiency = profile.step_efficiency
    if profile.step_bound not in ("memory", "compute") or efficiency is None:
        return "Whole step: no verdict (no roofs for this device, or written by an older gpuscope)"
    intensity = profile.step_intensity_flop_per_byte
    at = "" if intensity is None else f" at {intensity:.3g} FLOP/byte"
    return (
        f"Whole step: {profile.step_bound}-bound{at}, {efficiency * 100:.0f}% of the "
        f"{profile.step_roof or 'bounding'} roof"
    )


def _coverage_text(profile: StoredProfile) -> str:
    """Coverage and the groups whose FLOPs are unknown (verdict ``unknown``), with their time."""
    text = (coverage_text(profile) or "coverage not recorded (written by an older gpuscope)").capitalize()
    if profile.coverage is not None:
        text += " of op time has a known FLOP count or is data movement"
    unknown = sorted((g for g in profile.groups if flops_unknown(g)), key=lambda g: -(g.time_s or 0.0))
    if unknown:
        listed = ", ".join(f"{g.name} {format_ms(g.time_s)} ms" for g in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        text += f"; FLOPs unknown (no verdict): {listed}{more}"
    if profile.incomplete:
        text += f"; INCOMPLETE: {profile.steps} of {profile.steps_requested} profiled steps ran"
    if compiled_text(profile):  # torch.compile'd code: regions, fused kernels, graph breaks
        text += f"; {compiled_text(profile)}"
    if profile.generation:  # a generate() call: prefill and decode (gpuscope.profiling.generation)
        from gpuscope.profiling.generation_result import generation_text

        text += f"; {generation_text(profile.generation)}"
    return text


def _chart(
    roofline: Roofline | None,
    workload: Workload,
    groups: list[StoredGroup],
    phases: list[StoredPhase],
    phase_dtype: str | None,
    number: int,
) -> str | None:
    device, host = workload.device, workload.host
    roofs = [
        roof
        for roof in (roofline.roofs or [] if roofline else [])
        if roof.device == device and (host is None or roof.host in (None, host)) and roof.kind in ("compute", "memory")
    ]
    named: list[tuple[str, StoredGroup | StoredPhase]] = [
        (f"#{rank} {(group.op or '').split('::')[-1]}", group) for rank, group in enumerate(groups, 1)
    ]
    named += [(str(phase.kind), phase) for phase in phases]  # a generate() call's prefill and decode
    points = []
    for name, group in named:
        # a phase has the dtype its profile placed it with (a point without one meets no compute roof)
        dtype = group.dtype if isinstance(group, StoredGroup) else phase_dtype
        flops, nbytes, time_s = group.flops, group.bytes, group.time_s
        if not flops or not nbytes or not time_s:
            continue
        points.append(
            Point(
                name=name,
                device=device,
                host=roofs[0].host if roofs else host,
                rank=roofs[0].rank if roofs else None,
                device_type=roofs[0].device_type if roofs else None,
                dtype=dtype,
                flop_per_s=flops / time_s,
                intensity_flop_per_byte=flops / nbytes,
            )
        )
    if not roofs or not points:
        return None
    return roofline_svg(
        Roofline(roofs=roofs, points=points), prefix=f"profile{number}",
        label=f"Roofline of profile {number}: its costliest op groups"
        + (" and its prefill and decode" if phases else "") + f" on {device}",
    )  # fmt: skip


_GROUP_HEADERS = [
    "#",
    "op dtype shapes",
    "module",
    "bound",
    "ms/step",
    "share",
    "eff.",
    "lost ms",
    "step speed-up at roof",
]
#: the columns of the Markdown table
_MARKDOWN_COLUMNS = (0, 1, 2, 3, 4, 6, 7)


_PHASE_HEADERS = ["phase", "tokens", "ms", "tokens/s", "FLOPs", "bytes", "FLOP/B", "bound", "eff.", "roof", "J/token"]


def _phase_rows(profile: StoredProfile) -> list[list[str]]:
    """A ``generate()`` profile's prefill, decode and loop as table rows (:data:`_PHASE_HEADERS`),
    their verdicts as the profile placed them; [] for any other profile."""
    generation = read_generation(profile.generation)
    if generation is None:
        return []
    rows = []
    for phase in generation.phases:
        tokens = "-" if phase.kind == "loop" or phase.tokens is None else f"{phase.tokens:g}"
        efficiency = phase.efficiency
        if phase.j_per_token is not None:
            per_token = format_si(phase.j_per_token, "J")
        else:
            per_token = "unavailable" if phase.j_per_token_unavailable else "-"
        rows.append([
            str(phase.kind), tokens, format_ms(phase.time_s),
            format_si(phase.tokens_per_s, "", 4),
            format_si(phase.flops, ""), format_si(phase.bytes, "B"),
            format_intensity(phase.intensity_flop_per_byte),
            str(phase.bound or "-"), "-" if efficiency is None else f"{efficiency * 100:.0f}%",
            str(phase.roof or "-"), per_token,
        ])  # fmt: skip
    return rows


def _group_rows(profiled: Profiled) -> list[list[str]]:
    """The top groups as table rows (:data:`_GROUP_HEADERS`)."""
    step_s, rows = profiled.step_s, []
    for rank, group in enumerate(profiled.profile.top_groups(TOP_GROUPS), 1):
        numbers = group_numbers(group.time_s, step_s, group.efficiency, group.time_lost_s, group.step_speedup)
        rows.append([str(rank), group.name, group.first_module, str(group.bound or "-"), *numbers])
    return rows


def profile_section_html(results: Sequence[EmbeddedResults], roofline: Roofline | None = None) -> str | None:
    """The body of the "Where the time goes" section, or None when the report has no profile.
    ``results`` are the report's results; ``roofline`` is its roofline section, whose roofs the
    groups' chart draws."""
    profiles = profiles_of(results)
    if not profiles:
        return None
    parts = []
    for number, (label, profiled) in enumerate(profiles, 1):
        workload, profile = profiled.workload, profiled.profile
        step_s = profiled.step_s
        ops_s = profile.ops_s
        share = f"{ops_s / step_s * 100:.1f}%" if ops_s is not None and step_s else "-"
        parts.append(
            f"<h3>{_e(workload.name)} <small>on {_e(workload.device)} "
            f"({_e(workload.device_name)}), from {_e(label)}</small></h3>\n"
        )
        parts.append(
            '<ul class="summary">'
            f"<li>Step {_e(format_si(step_s, 's'))} ({_e(profile.steps)} profiled steps, mean); {share} of "
            f"it inside ops ({_e(profile.time_basis)})</li>"
            f"<li>FLOPs per step {_e(format_si(profile.flop_counter_flops, ''))} "
            "(FlopCounterMode) + "
            f"{_e(format_si(profile.pointwise_flops, ''))} pointwise; bytes "
            f"{_e(format_si(workload.bytes, 'B'))} (sum of per-op lower bounds)</li>"
            f"<li>{_e(_step_verdict_text(profile))}</li>"
            f"<li>{_e(_coverage_text(profile))}</li>"
            f"<li>Energy: {_e(_energy_text(workload))}</li>"
            f"<li>{_e(profile.roofs)}</li>"
            "</ul>\n"
        )
        compared = read_compare_eager(profile.compiled)
        if compared:  # profiled with --compare-eager: the same step eager, region by region
            parts.append(
                _table(
                    COMPARE_HEADERS,
                    compare_rows(compared),
                    {1, 2, 3, 4},
                    f"profile-{number}-compare-eager",
                    "eager vs compiled",
                )  # fmt: skip
            )
            parts.append(
                '<p class="note">The same step with torch.compile off (set_stance "force_eager"), in the same process; '
                "time per step; speed-up = eager / compiled time; FLOPs c/e = compiled / eager count.</p>\n"
            )
        phase_rows = _phase_rows(profile)
        if phase_rows:
            parts.append(
                _table(
                    _PHASE_HEADERS,
                    phase_rows,
                    {1, 2, 3, 4, 5, 6, 8, 10},
                    f"profile-{number}-generation",
                    "generate(): prefill, decode and the loop's own ops",
                )  # fmt: skip
            )
            parts.append(
                '<p class="note">Per generate() call: prefill = the first forward call, decode = every later one '
                "(together), loop = generate's own ops outside them; times unprofiled; the verdicts as the profile "
                "placed them against its roofs.</p>\n"
            )
        parts.append(
            _table(_GROUP_HEADERS, _group_rows(profiled), {0, 4, 5, 6, 7, 8}, f"profile-{number}", "op groups")
        )
        parts.append(
            '<p class="note">Ranked by time lost = measured time - time at roof (FLOPs / attainable FLOP/s; data '
            "movement: bytes / DRAM roof). Efficiency = time at roof / measured time.</p>\n"
        )
        modules = [m for m in profile.modules if (m.path or "").count(".") <= 1]  # two levels
        modules.sort(key=lambda m: -(m.time_s or 0))
        module_rows = [
            [str(m.path), format_ms(m.time_s), format_si(m.flops, ""), format_si(m.bytes, "B")] for m in modules[:12]
        ]
        if module_rows:
            headers = ["module (submodules included)", "ms/step", "FLOPs", "bytes"]
            parts.append(_table(headers, module_rows, {1, 2, 3}, f"profile-{number}-modules", "modules"))
        phases = generation_phases(profile)
        dtype = generation_dtype(profile, workload.dtype)
        svg = _chart(roofline, workload, profile.top_groups(TOP_GROUPS), phases, dtype, number)
        if svg:
            also = "; prefill and decode are the generate() phases above" if phases else ""
            parts.append(
                f"<figure>\n{svg}<figcaption>The groups above that have FLOPs and bytes, as points; each point's "
                f"name starts with its row in the table above (#){also}. Roofs of "
                f"{_e(workload.device)}.</figcaption>\n</figure>\n"
            )
    return "".join(parts)


def energy_section_html(results: Sequence[EmbeddedResults]) -> str | None:
    """The energy section: FLOP/J of every workload with energy, and the energy roofline (Choi et
    al. 2013) per device whose probe ceilings carry energy. None when nothing carries energy fields."""
    ceilings = [c for entry in results for c in entry.document.ceilings]
    workloads = [w for entry in results for w in entry.document.workloads]
    with_fields = [w for w in workloads if w.energy_j is not None or w.energy_unavailable is not None]
    if not with_fields and not any(c.energy_j is not None or c.energy_unavailable is not None for c in ceilings):
        return None
    rows = []
    for workload in with_fields:
        joules, intensity = workload.energy_j, workload.intensity_flop_per_byte
        rows.append(
            [
                workload.name,
                workload.device,
                format_si(joules, "J") if joules else "unavailable",
                format_si(workload.flop_per_j, "FLOP/J"),
                "-" if intensity is None else f"{intensity:.3g}",
                workload.energy_unavailable or workload.energy_method or "",
            ]
        )
    headers = ["workload", "device", "energy per call/step", "FLOP/J", "FLOP/byte", "counter or reason"]
    parts = [_table(headers, rows, {2, 3, 4}, "energy-workloads", "workloads with energy")] if rows else []
    roofs = energy_roofs_from_ceilings(ceilings)
    if not roofs:
        parts.append(
            '<p class="note">Energy roofline: unavailable: no probe ceiling carries energy (NVML energy counter or '
            "readable RAPL needed during `gpuscope probe`).</p>\n"
        )
        return "".join(parts)
    for roof in roofs:
        parts.append(
            f'<p class="meta">{_e(roof.device)}: {_e(format_si(roof.j_per_flop, "J"))} per FLOP '
            f"({_e(roof.compute_ceiling)}), {_e(format_si(roof.j_per_byte, 'J'))} per DRAM byte "
            f"({_e(roof.memory_ceiling)}); "
            f"peak {_e(format_si(roof.peak_flop_per_j, 'FLOP/J'))}; energy balance point "
            f"{roof.balance_flop_per_byte:.3g} FLOP/byte.</p>\n"
        )
        points = [(w.name, w.intensity_flop_per_byte, w.flop_per_j) for w in workloads if w.device == roof.device]
        parts.append(_energy_svg(roof, [(name, x, y) for name, x, y in points if x and y]))
    parts.append(
        '<p class="note">Energy roofline after Choi, Bedard, Fowler and Vuduc (IPDPS 2013): FLOP/J = 1 / (J per '
        "FLOP + J per byte / intensity), costs from the probe ceilings' mean power (constant power folded "
        "in).</p>\n"
    )
    return "".join(parts)


def _energy_svg(roof: EnergyRoofs, points: list[tuple[str, float, float]]) -> str:
    """A small log-log SVG: the energy roofline and the workloads' FLOP/J."""
    width, height, pad = 640, 300, 48
    xs = [0.01, 1000.0] + [x for _, x, _ in points]
    x_lo, x_hi = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    curve = [(10 ** (x_lo + (x_hi - x_lo) * i / 60), 0.0) for i in range(61)]
    curve = [(x, attainable_flop_per_j(x, roof.j_per_flop, roof.j_per_byte)) for x, _ in curve]
    ys = [y for _, y in curve] + [y for _, _, y in points]
    y_lo, y_hi = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    y_hi = max(y_hi, y_lo + 1)

    def sx(x: float) -> float:
        return pad + (math.log10(x) - x_lo) / (x_hi - x_lo) * (width - 2 * pad)

    def sy(y: float) -> float:
        return height - pad - (math.log10(y) - y_lo) / (y_hi - y_lo) * (height - 2 * pad)

    out = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="Energy roofline of '
        f'{_e(roof.device)}" xmlns="http://www.w3.org/2000/svg">'
    ]
    out.append(
        f'<rect x="{pad}" y="{pad}" width="{width - 2 * pad}" height="{height - 2 * pad}" fill="none" '
        'stroke="var(--chart-grid)"/>'
    )
    for decade in range(x_lo, x_hi + 1):
        out.append(
            f'<text x="{sx(10**decade):.1f}" y="{height - pad + 14}" font-size="10" text-anchor="middle" '
            f'fill="var(--chart-fg)">{_e(format_si(10**decade, ""))}</text>'
        )
    for decade in range(y_lo, y_hi + 1):
        out.append(
            f'<text x="{pad - 4}" y="{sy(10**decade):.1f}" font-size="10" text-anchor="end" '
            f'fill="var(--chart-fg)">{_e(format_si(10**decade, ""))}</text>'
        )
    path = " ".join(f"{'M' if i == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for i, (x, y) in enumerate(curve))
    out.append(f'<path d="{path}" fill="none" stroke="var(--c0)" stroke-width="2"/>')
    balance = roof.balance_flop_per_byte
    if 10**x_lo < balance < 10**x_hi:
        by = attainable_flop_per_j(balance, roof.j_per_flop, roof.j_per_byte)
        out.append(f'<circle cx="{sx(balance):.1f}" cy="{sy(by):.1f}" r="4" fill="none" stroke="var(--c0)"/>')
    for number, (name, x, y) in enumerate(points, 1):
        out.append(
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="var(--c1)"><title>{_e(name)}</title></circle>'
        )
        out.append(
            f'<text x="{sx(x) + 6:.1f}" y="{sy(y) - 6:.1f}" font-size="10" fill="var(--chart-fg)">{number}</text>'
        )
    out.append(
        f'<text x="{width / 2}" y="{height - 8}" font-size="11" text-anchor="middle" '
        'fill="var(--chart-fg)">arithmetic intensity (FLOP/byte)</text>'
    )
    out.append(
        f'<text x="12" y="{pad - 12}" font-size="11" fill="var(--chart-fg)">FLOP/J (energy roofline, '
        f"{_e(roof.device)})</text>"
    )
    out.append("</svg>\n")
    return "".join(out)


def profile_markdown_lines(results: Sequence[EmbeddedResults], md_escape: Callable[[object], str]) -> list[str]:
    """The section as Markdown lines (summary and top groups per profile), every text through
    ``md_escape`` (the report's Markdown escaping); empty without profiles."""
    lines: list[str] = []
    for label, profiled in profiles_of(results):
        workload = profiled.workload
        lines.append(f"### {md_escape(workload.name)} on {md_escape(workload.device)} ({md_escape(label)})")
        lines.append("")
        lines.append(f"Energy: {md_escape(_energy_text(workload))}. {md_escape(profiled.profile.roofs)}")
        lines.append("")
        lines.append(md_escape(_step_verdict_text(profiled.profile)) + ".")
        lines.append("")
        lines.append(md_escape(_coverage_text(profiled.profile)) + ".")
        lines.append("")
        compared = read_compare_eager(profiled.profile.compiled)
        if compared:
            lines.append("| " + " | ".join(COMPARE_HEADERS) + " |")
            lines.append("|---|" + "---:|" * (len(COMPARE_HEADERS) - 1))
            lines.extend("| " + " | ".join(md_escape(cell) for cell in row) + " |" for row in compare_rows(compared))
            lines.append("")
        phase_rows = _phase_rows(profiled.profile)
        if phase_rows:
            lines.append("| " + " | ".join(_PHASE_HEADERS) + " |")
            lines.append("|---|" + "---:|" * 6 + "---|---:|---|---:|")
            lines.extend("| " + " | ".join(md_escape(cell) for cell in row) + " |" for row in phase_rows)
            lines.append("")
        lines.append("| " + " | ".join(_GROUP_HEADERS[i] for i in _MARKDOWN_COLUMNS) + " |")
        lines.append("|---:|---|---|---|---:|---:|---:|")
        for row in _group_rows(profiled):
            cells = [md_escape(row[i]) if i in (1, 2, 3) else row[i] for i in _MARKDOWN_COLUMNS]  # text escaped
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return lines
