"""``gpuscope compare``: the ceilings and workloads of two or more runs or machines side by side,
with differences beyond the measured spread flagged.

Columns are runs: one per results file, or one per host and rank in a multi-node file. Rows are
a device's ceiling (``cuda:3 memory dram.triad``) or workload. Each value is held against its
peers, every other (run, device) that measured the same thing on the same kind of device: the
median of the peers is the reference, and a difference is flagged when it is larger than the
value's own spread plus the peers' median spread (the best-of-N spread of a ceiling's timed
samples, the p10-p90 half range of a workload), and never below :data:`MIN_NOISE_PERCENT`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from gpuscope.report.compare_document import (
    AboveDatasheetNote,
    Comparison,
    Flag,
    Row,
    Run,
    StragglerNote,
    Table,
    Value,
)
from gpuscope.report.fmt import clean_text, fmt_percent, fmt_quantity, fmt_seconds, natural_key
from gpuscope.report.markdown import md_escape
from gpuscope.report.model import (
    LOW_PERCENT_OF_SPEC,
    ceiling_spread_percent,
    median_of,
    placement_of,
    workload_spread_percent,
)
from gpuscope.report.roofview import DatasheetIndex, DeviceFacts, datasheet_roofs
from gpuscope.roofline.loading import build_model, out_of_order_ceilings
from gpuscope.roofline.model import ABOVE_DATASHEET_TEXT, ABOVE_DATASHEET_TOLERANCE, is_above_datasheet
from gpuscope.roofline.stragglers import below_median_percent, below_text
from gpuscope.schema.results import Measurement, Results, contention_notes

__all__ = [
    "COMPARE_SCHEMA",
    "STRAGGLER_MARK",
    "LOW_MARK",
    "ABOVE_DATASHEET_MARK",
    "compare_results",
    "render_compare_text",
    "render_compare_markdown",
    "MIN_NOISE_PERCENT",
    "DEFAULT_NOISE_PERCENT",
]

COMPARE_SCHEMA = "gpuscope.compare"
#: Differences smaller than this are never flagged (timer resolution, clock jitter).
MIN_NOISE_PERCENT = 2.0
#: The spread assumed for a value with fewer than two timed samples.
DEFAULT_NOISE_PERCENT = 5.0
#: Marks a straggler rank's column and its straggler values (``gpuscope probe --distributed``).
STRAGGLER_MARK = "[straggler]"
#: Marks a ceiling below the report's LOW threshold of its datasheet value.
LOW_MARK = "LOW"
#: Marks a ceiling more than gpuscope.roofline.model.ABOVE_DATASHEET_TOLERANCE above its datasheet value.
ABOVE_DATASHEET_MARK = "ABOVE DATASHEET"
ABOVE_DATASHEET_TOLERANCE_PERCENT = ABOVE_DATASHEET_TOLERANCE * 100.0
#: More runs than this (a multi-node file: one per host and rank): the text and Markdown tables
#: show one column per results file (median and range); the JSON keeps every run.
FLEET_COLUMNS = 16
_FLEET_TEXT = (
    f"More than {FLEET_COLUMNS} runs: one column per results file, the median [lowest–highest] of its runs "
    "(a multi-node file has one per host and rank) and how many are marked; --format json lists every run."
)
_KIND_WORDS = {"compute": "compute", "memory": "memory bandwidth", "transfer": "transfer", "collective": "collective"}


@dataclass
class _Cell:
    """One value before it is flagged against its peers and gathered into rows."""

    table: Table
    run: str
    device: str
    device_type: str
    kind: str
    name: str
    unit: str
    value: float
    spread_percent: float | None
    n: int | None
    higher_is_better: bool
    straggler: bool = False
    datasheet_value: float | None = None
    percent_of_spec: float | None = None
    low: bool = False
    above_datasheet: bool = False
    difference_percent: float | None = None
    flagged: bool = False

    @property
    def noise_percent(self) -> float:
        return DEFAULT_NOISE_PERCENT if self.spread_percent is None else self.spread_percent

    def value_json(self) -> Value:
        out: Value = {
            "value": self.value, "spread_percent": self.spread_percent, "n": self.n,
            "difference_percent": self.difference_percent, "flagged": self.flagged,
        }  # fmt: skip
        if self.straggler:
            out["straggler"] = True
        if self.table == "ceilings":
            out["datasheet_value"], out["percent_of_spec"] = self.datasheet_value, self.percent_of_spec
            out["low"], out["above_datasheet"] = self.low, self.above_datasheet
        return out


def _kind_word(kind: str, name: str, dev_type: str) -> str:
    if kind == "memory" and name.split(".")[0].lower() in ("dram", "hbm"):
        return "HBM" if dev_type == "gpu" else "DRAM"
    return _KIND_WORDS.get(kind, kind)


def compare_results(inputs: Sequence[tuple[str, Results]]) -> Comparison:
    """Compare results files, ``(label, results)`` pairs; JSON-ready output."""
    # the roofs the report holds ceilings against
    datasheet = DatasheetIndex(datasheet_roofs(build_model(inputs)))
    runs: dict[str, Run] = {}  # label -> run, in column order
    above_datasheet: list[AboveDatasheetNote] = []
    cells: list[_Cell] = []
    stragglers: list[StragglerNote] = []
    multi_host_files = set()
    for label, doc in inputs:
        place = placement_of(doc)
        if len({place(item) for item in doc.ceilings} | {place(item) for item in doc.workloads}) > 1:
            multi_host_files.add(label)
    for label, doc in inputs:
        place = placement_of(doc)
        by_id: dict[str | int | None, Measurement] = {m.id: m for m in doc.measurements if m.id is not None}
        facts = DeviceFacts(doc.devices, doc.system)
        for ceiling in doc.ceilings:
            device = ceiling.device
            host, rank = place(ceiling)
            spread, count = ceiling_spread_percent(by_id.get(ceiling.measurement_id))
            run = _run_label(runs, label, (host, rank), label in multi_host_files)
            spec = datasheet.value(ceiling.kind, ceiling.name, device, host, rank)
            percent = ceiling.value / spec * 100.0 if spec else None
            above = is_above_datasheet(percent)
            if above:
                above_datasheet.append(
                    {
                        "run": run, "device": device, "kind": ceiling.kind, "name": ceiling.name,
                        "value": ceiling.value, "datasheet_value": spec, "percent_of_spec": percent,
                        "text": f"{run} {device} {ceiling.name} {fmt_percent(percent)} of datasheet: "
                        + ABOVE_DATASHEET_TEXT,
                    }
                )  # fmt: skip
            straggler = ceiling.straggler is True
            if straggler:
                median = median_of(ceiling)
                below = below_median_percent(ceiling.value, median)
                stragglers.append(
                    {
                        "run": run, "source": label, "host": host, "rank": rank, "device": device,
                        "kind": ceiling.kind, "name": ceiling.name, "unit": ceiling.unit,
                        "value": ceiling.value, "median": median, "below_median_percent": below,
                        "text": f"{run} {device} {ceiling.name} {fmt_quantity(ceiling.value, ceiling.unit)}, "
                        f"{below_text(below)}" + (f" {fmt_quantity(median, ceiling.unit)}" if median else "")
                        + " of its ranks",
                    }
                )  # fmt: skip
                runs[run]["straggler"] = True
            cells.append(
                _Cell(
                    "ceilings", run, device, facts.type_of(device), ceiling.kind, ceiling.name, ceiling.unit,
                    ceiling.value, spread, count, higher_is_better=True, straggler=straggler, datasheet_value=spec,
                    percent_of_spec=percent,
                    low=percent is not None and percent < LOW_PERCENT_OF_SPEC.get(ceiling.kind, 0.0),
                    above_datasheet=above,
                )
            )  # fmt: skip
        for workload in doc.workloads:
            if workload.time_s <= 0:
                continue
            cells.append(
                _Cell(
                    "workloads", _run_label(runs, label, place(workload), label in multi_host_files),
                    workload.device, facts.type_of(workload.device), "workload", workload.name, "s",
                    workload.time_s, workload_spread_percent(workload), workload.n, higher_is_better=False,
                )
            )  # fmt: skip
    flags = _flag(cells, len(runs))
    tables: dict[Table, list[Row]] = {}
    for table in ("ceilings", "workloads"):
        rows: dict[tuple[str, str, str], Row] = {}
        for cell in cells:
            if cell.table != table:
                continue
            row = rows.get((cell.device, cell.kind, cell.name))
            if row is None:
                row = rows[(cell.device, cell.kind, cell.name)] = {
                    "device": cell.device, "device_type": cell.device_type, "kind": cell.kind, "name": cell.name,
                    "unit": cell.unit, "values": {},
                }  # fmt: skip
            row["values"][cell.run] = cell.value_json()
        tables[table] = sorted(
            rows.values(),
            key=lambda r: (r["device_type"] != "gpu", natural_key(r["device"]), r["kind"], natural_key(r["name"])),
        )
    return {
        "schema": COMPARE_SCHEMA,
        "schema_version": 1,
        "runs": list(runs.values()),
        "ceilings": tables["ceilings"],
        "workloads": tables["workloads"],
        "flags": flags,
        "stragglers": stragglers,
        "above_datasheet": above_datasheet,
        "contention": [f"{label}: {note}" for label, doc in inputs for note in contention_notes(doc)],
        "out_of_order": [
            f"{label}: {device} {text}"
            for label, doc in inputs
            for (device, _), text in out_of_order_ceilings(doc.ceilings).items()
        ],
        "rule": (
            f"a value is flagged when it differs from the median of its peers "
            f"(the same ceiling or workload on the same kind of device in every run) "
            f"by more than its own spread plus the peers' median spread, and by at least {MIN_NOISE_PERCENT:g}%, "
            f"judged on the log ratio (|ln(value / median)| > ln(1 + spread), the same both ways); "
            f"between two runs each difference is listed once, the second run against the first"
        ),
    }


def _run_label(runs: dict[str, Run], label: str, where: tuple[str | None, int | None], per_host: bool) -> str:
    """The column of an entry: the file's label, with host and rank for a multi-node file;
    registers a new column in ``runs`` (label -> run)."""
    host, rank = where
    run_label = label + ((f" {host or '?'}" + (f"/r{rank}" if rank is not None else "")) if per_host else "")
    if run_label not in runs:
        runs[run_label] = {"label": run_label, "source": label, "host": host, "rank": rank, "straggler": False}
    return run_label


def _flag(cells: list[_Cell], run_count: int) -> list[Flag]:
    groups: dict[tuple[str, str, str, str], list[_Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.table, cell.device_type, cell.kind, cell.name), []).append(cell)
    flags: list[Flag] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        # every cell's peers are the group less itself: medians of the sorted group with one value
        # left out (sorting per cell made a group of n runs cost n^2 log n)
        values = _LeaveOneOut([cell.value for cell in members])
        spreads = _LeaveOneOut([cell.noise_percent for cell in members])
        for position, cell in enumerate(members):
            reference = values.median_without(position)
            if reference <= 0:
                continue
            if cell.higher_is_better:
                difference = (cell.value / reference - 1.0) * 100.0
            else:  # a time: positive means faster than the peers
                difference = (reference / cell.value - 1.0) * 100.0
            noise = max(MIN_NOISE_PERCENT, cell.noise_percent + spreads.median_without(position))
            cell.difference_percent = difference
            # the symmetric rule: |log ratio| against log(1 + spread), so a 59% rise and the 37% fall
            # that undoes it are judged alike; a pair is listed once, the later run against the first
            ratio = 1.0 + difference / 100.0
            beyond = ratio <= 0 or abs(math.log(ratio)) > math.log1p(noise / 100.0)
            if not beyond or (len(members) == 2 and position == 0):
                continue
            cell.flagged = True
            peer = members[1] if position == 0 else members[0]
            peer_text = "the others" if len(members) > 2 else peer.run + (
                f" {peer.device}" if peer.device != cell.device else ""
            )  # fmt: skip
            where = f"{cell.run} {cell.device}" if run_count > 1 else cell.device
            if cell.table == "ceilings":
                what = f"{_kind_word(cell.kind, cell.name, cell.device_type)} ({cell.name})"
                direction = "above" if difference > 0 else "below"
            else:
                what = f"workload {cell.name!r}"
                direction = "faster than" if difference > 0 else "slower than"
            flags.append(
                {
                    "run": cell.run, "device": cell.device, "table": cell.table, "kind": cell.kind,
                    "name": cell.name, "difference_percent": difference, "noise_percent": noise,
                    "text": f"{where} {what} {abs(difference):.0f}% {direction} {peer_text} (spread ±{noise:.1f}%)",
                }
            )  # fmt: skip
    flags.sort(key=lambda f: -abs(f["difference_percent"]))
    return flags


class _LeaveOneOut:
    """Values sorted once; :meth:`median_without` is ``statistics.median`` of them less one (the
    same arithmetic, so the same float)."""

    def __init__(self, values: list[float]) -> None:
        order = sorted(range(len(values)), key=values.__getitem__)
        self.sorted = [values[index] for index in order]
        self.rank = [0] * len(values)  # position -> its place in ``sorted``
        for place, index in enumerate(order):
            self.rank[index] = place

    def median_without(self, position: int) -> float:
        """The median of every value but the one at ``position`` (at least two values)."""
        skip, count = self.rank[position], len(self.sorted) - 1

        def at(place: int) -> float:
            return self.sorted[place if place < skip else place + 1]

        half = count // 2
        return at(half) if count % 2 else (at(half - 1) + at(half)) / 2


# --- rendering -------------------------------------------------------------------------------


def _cell_text(row: Row, run: str) -> str:
    entry = row["values"].get(run)
    if entry is None:
        return "–"
    text = fmt_seconds(entry["value"]) if row["unit"] == "s" else fmt_quantity(entry["value"], row["unit"])
    difference = entry["difference_percent"]
    if entry["flagged"] and difference is not None:
        text += f" {'▲' if difference > 0 else '▼'}{fmt_percent(abs(difference))}"
    if entry.get("straggler"):
        text += " " + STRAGGLER_MARK
    if entry.get("low"):  # against the datasheet, as the report's Flag column
        text += " " + LOW_MARK
    if entry.get("above_datasheet"):
        text += " " + ABOVE_DATASHEET_MARK
    return text


def _run_header(run: Run) -> str:
    return run["label"] + (f" {STRAGGLER_MARK}" if run["straggler"] else "")


def _grid(result: Comparison, table: Table) -> tuple[list[str], list[list[str]], int]:
    """Headers, rows and how many value columns end each row: one per run, or for more runs than
    :data:`FLEET_COLUMNS` (a multi-node file has one per rank) one per results file."""
    runs = result["runs"]
    headers = ["device", "kind", "name"] if table == "ceilings" else ["device", "workload (time)"]
    sources: dict[str, int] = {}  # results file -> how many runs it has
    source_of: dict[str, str] = {}  # run label -> its results file
    for run in runs:
        sources[run["source"]] = sources.get(run["source"], 0) + 1
        source_of[run["label"]] = run["source"]
    fleet = len(runs) > FLEET_COLUMNS
    if fleet:
        headers += [f"{source} ({count} runs)" for source, count in sources.items()]
    else:
        headers += [_run_header(run) for run in runs]
    rows = []
    for row in result[table]:
        cells = [row["device"], row["kind"], row["name"]] if table == "ceilings" else [row["device"], row["name"]]
        if fleet:
            # a row's values by file, from the values it has (not every run of the file: a row of
            # one device has a value in few of a fleet's runs)
            by_source: dict[str, list[Value]] = {source: [] for source in sources}
            for label, entry in row["values"].items():
                by_source[source_of[label]].append(entry)
            values = [_summary_text(row, entries) for entries in by_source.values()]
        else:
            values = [_cell_text(row, run["label"]) for run in runs]
        rows.append([clean_text(cell, 60) for cell in cells] + values)
    return headers, rows, len(headers) - (3 if table == "ceilings" else 2)


def _summary_text(row: Row, entries: list[Value]) -> str:
    """A row's values ``entries`` of the runs of one file: median [lowest-highest], and how many
    are flagged, stragglers, low or above their datasheet value."""
    if not entries:
        return "–"

    def text(value: float) -> str:
        return fmt_seconds(value) if row["unit"] == "s" else fmt_quantity(value, row["unit"])

    values = [entry["value"] for entry in entries]
    out, low, high = text(statistics.median(values)), text(min(values)), text(max(values))
    if low != high:
        out += f" [{low}–{high}]"
    marks: tuple[tuple[Literal["flagged", "straggler", "low", "above_datasheet"], str], ...] = (
        ("flagged", "flagged"), ("straggler", STRAGGLER_MARK), ("low", LOW_MARK),
        ("above_datasheet", ABOVE_DATASHEET_MARK),
    )  # fmt: skip
    for key, mark in marks:
        count = sum(1 for entry in entries if entry.get(key))
        if count:
            out += f" {count}× {mark}"
    return out


_TABLES: tuple[tuple[Table, str], ...] = (("ceilings", "Ceilings"), ("workloads", "Workloads"))


def render_compare_text(result: Comparison) -> str:
    """Aligned plain-text tables and the flagged differences."""
    out: list[str] = []
    for table, title in _TABLES:
        if not result[table]:
            continue
        headers, rows, count = _grid(result, table)
        headers = [clean_text(h, 60) for h in headers]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
        out.append(title)
        out.append("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
        out.append("  ".join("-" * w for w in widths))
        for row in rows:
            out.append(
                "  ".join(
                    c.rjust(w) if i >= len(headers) - count else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
                ).rstrip()
            )
        out.append("")
    if len(result["runs"]) > FLEET_COLUMNS and (result["ceilings"] or result["workloads"]):
        out += [_FLEET_TEXT, ""]
    for number, (title, items) in enumerate(_notes(result, str)):
        if items:
            out += [f"{title}:", *(f"  {clean_text(text, 300)}" for text in items), *([""] if number < 3 else [])]
    if not result["flags"]:
        out.append("No difference beyond the measured spread.")
    return "\n".join(out) + "\n"


def _notes(result: Comparison, mark: Callable[[str], str]) -> list[tuple[str, list[str]]]:
    """(title, texts) of the contention warnings, the stragglers, the ceilings above their datasheet
    value and the flagged differences; ``mark`` escapes the marks for the format."""
    above = f"more than {ABOVE_DATASHEET_TOLERANCE_PERCENT:g}% above the datasheet value"
    return [
        ("Contention while measuring (numbers may be low)", list(result.get("contention", []))),
        (
            f"Stragglers ({mark(STRAGGLER_MARK)}), flagged by the multi-rank probe run",
            [item["text"] for item in result["stragglers"]],
        ),
        (
            f"Above datasheet ({mark(ABOVE_DATASHEET_MARK)}), {above}",
            [item["text"] for item in result["above_datasheet"]],
        ),
        (
            "Out of order (slower than a level farther from the core; not drawn as roofs)",
            list(result.get("out_of_order", [])),
        ),
        ("Differences beyond the measured spread", [flag["text"] for flag in result["flags"]]),
    ]


def render_compare_markdown(result: Comparison) -> str:
    """Markdown tables and the flagged differences (cells escaped)."""
    out: list[str] = ["# gpuscope compare\n"]
    for title, items in _notes(result, md_escape):
        if items:
            out += [f"\n**{title}**\n\n", *(f"- {md_escape(text)}\n" for text in items)]
    if not result["flags"]:
        out.append("\nNo difference beyond the measured spread.\n")
    for table, title in _TABLES:
        if not result[table]:
            continue
        headers, rows, count = _grid(result, table)
        out.append(f"\n## {title}\n\n")
        out.append("| " + " | ".join(md_escape(h) or " " for h in headers) + " |\n")
        out.append("|" + "|".join("---:" if i >= len(headers) - count else "---" for i in range(len(headers))) + "|\n")
        out.extend("| " + " | ".join(md_escape(c) for c in row) + " |\n" for row in rows)
    if len(result["runs"]) > FLEET_COLUMNS:
        out.append(f"\n_{md_escape(_FLEET_TEXT)}_\n")
    out.append(f"\n_{md_escape(result['rule'])}._\n")
    return "".join(out)
