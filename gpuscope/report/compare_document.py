"""The document ``gpuscope compare --format json`` writes (``"schema": "gpuscope.compare"``), key for
key in the order it is written: built by :func:`gpuscope.report.compare.compare_results`, painted
as text and Markdown by the same module."""

from __future__ import annotations

from typing import Literal, TypedDict

from gpuscope.profiling.compare import ProfilePair

__all__ = ["AboveDatasheetNote", "Comparison", "Flag", "Row", "Run", "StragglerNote", "Table", "Value"]

Table = Literal["ceilings", "workloads"]


class Run(TypedDict):
    """One column: a results file, or one host and rank of a multi-node file."""

    label: str
    source: str
    host: str | None
    rank: int | None
    straggler: bool


class _Value(TypedDict):
    value: float
    spread_percent: float | None
    n: int | None
    difference_percent: float | None
    flagged: bool


class Value(_Value, total=False):
    """One run's value in a row; ``straggler`` only when true, the datasheet keys only for ceilings."""

    straggler: bool
    datasheet_value: float | None
    percent_of_spec: float | None
    low: bool
    above_datasheet: bool


class Row(TypedDict):
    """A device's ceiling or workload across the runs (``values``: run label -> value)."""

    device: str
    device_type: str
    kind: str
    name: str
    unit: str
    values: dict[str, Value]


class Flag(TypedDict):
    run: str
    device: str
    table: Table
    kind: str
    name: str
    difference_percent: float
    noise_percent: float
    text: str


class StragglerNote(TypedDict):
    run: str
    source: str
    host: str | None
    rank: int | None
    device: str
    kind: str
    name: str
    unit: str
    value: float
    median: float | None
    below_median_percent: float | None
    text: str


class AboveDatasheetNote(TypedDict):
    run: str
    device: str
    kind: str
    name: str
    value: float
    datasheet_value: float | None
    percent_of_spec: float | None
    text: str


class _Comparison(TypedDict):
    schema: str
    schema_version: int
    runs: list[Run]
    ceilings: list[Row]
    workloads: list[Row]
    flags: list[Flag]
    stragglers: list[StragglerNote]
    above_datasheet: list[AboveDatasheetNote]
    rule: str


class Comparison(_Comparison, total=False):
    """What :func:`compare_results` returns: JSON-ready (``compare --format json`` writes it as it is);
    ``profiles`` is added by the command when two profiles of one step are given."""

    profiles: list[ProfilePair]
    #: The compared files' contention warnings, "label: text" (gpuscope.schema.results.contention_notes).
    contention: list[str]
    #: Memory ceilings slower than a level farther from the core, "label: device text"
    #: (gpuscope.roofline.hierarchy): a measurement problem, flagged like "above datasheet".
    out_of_order: list[str]
