"""Working-set sweeps: plateaus found on synthetic curves, named after the OS cache sizes, a
level without a plateau said so, and the monotone-hierarchy flag from the probe to the chart."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.probing.derive import derive_ceilings
from gpuscope.results import empty_results
from gpuscope.roofline.hierarchy import OUT_OF_ORDER_TEXT, out_of_order, out_of_order_roofs
from gpuscope.roofline.layout import layout_roofline
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.sweep import CacheSizes, derive_sweeps, find_plateaus, level_of, sweep_levels
from gpuscope.schema.results import CacheLevel, Device, Measurement, Results
from gpuscope.schema.sweeps import NO_PLATEAU, SweepPoint

KiB, MiB = 1024, 1024 * 1024
CACHES = CacheSizes(l1_bytes=32 * KiB, l2_bytes=1 * MiB, llc_bytes=32 * MiB, threads=2)


def _footprints() -> list[int]:
    """Two sizes per octave from 4 KiB to 256 MiB in all (2 threads), as a sweep plans them."""
    return [int(4 * KiB * 2 ** (step / 2)) for step in range(33)]


def _curve(l1: float, l2: float, llc: float, dram: float) -> list[SweepPoint]:
    """A staircase: each level's rate while the working set (per core for L1/L2) fits it."""
    out = []
    for footprint in _footprints():
        per_core = footprint / CACHES.threads
        rate = l1 if per_core <= 24 * KiB else l2 if per_core <= 700 * KiB else llc if footprint <= 24 * MiB else dram
        out.append(SweepPoint(footprint_bytes=footprint, bytes_per_s=rate * 1e9))
    return out


def test_a_flat_run_is_a_plateau_and_a_short_one_is_a_transition() -> None:
    plateaus = find_plateaus([100, 101, 99, 100, 60, 30, 31, 30, 29])
    assert [(p.first, p.last) for p in plateaus] == [(0, 3), (5, 8)]
    assert plateaus[0].bytes_per_s == pytest.approx(100, rel=0.01)
    assert find_plateaus([100, 50, 25, 12]) == []  # every point differs: no level at all


def test_noise_within_the_tolerance_stays_one_plateau() -> None:
    assert len(find_plateaus([100, 110, 92, 105, 96, 108])) == 1
    assert len(find_plateaus([100, 102, 101, 150, 152, 149])) == 2


def test_levels_by_os_size_ranges() -> None:
    assert level_of(32 * KiB, CACHES) == "l1"  # 16 KiB per core
    assert level_of(1 * MiB, CACHES) == "l2"  # 512 KiB per core
    assert level_of(16 * MiB, CACHES) == "llc"
    assert level_of(256 * MiB, CACHES) == "dram"
    assert level_of(1 * MiB, CacheSizes(None, None, None, 2)) is None


def test_a_staircase_gives_every_level_with_its_size_checked() -> None:
    levels = {level.level: level for level in sweep_levels(_curve(400, 200, 100, 30), CACHES)}
    assert list(levels) == ["l1", "l2", "llc", "dram"]
    for name, rate in (("l1", 400), ("l2", 200), ("llc", 100), ("dram", 30)):
        assert levels[name].status == "ok"
        assert levels[name].plateau_bytes_per_s == pytest.approx(rate * 1e9)
        assert levels[name].out_of_order is None
    # the L1 plateau ends at 16-24 KiB per core, below the 32 KiB the OS reports
    ratio = levels["l1"].capacity_ratio
    assert ratio is not None and 0.4 <= ratio <= 1.0
    assert levels["l1"].os_cache_bytes == 32 * KiB and levels["dram"].os_cache_bytes is None


def test_a_level_without_its_plateau_is_unavailable_never_a_guess() -> None:
    # L2 and the LLC run at the same rate: one plateau, named after the range holding most of
    # its points; the other level has no plateau of its own
    levels = {level.level: level for level in sweep_levels(_curve(400, 150, 150, 30), CACHES)}
    statuses = {name: level.status for name, level in levels.items()}
    assert statuses["l1"] == "ok" and statuses["dram"] == "ok"
    assert sorted([statuses["l2"], statuses["llc"]]) == sorted([NO_PLATEAU, "ok"])
    missing = next(level for level in levels.values() if level.status == NO_PLATEAU)
    assert missing.plateau_bytes_per_s is None and missing.os_cache_bytes


def test_an_inverted_sweep_flags_the_slower_nearer_level() -> None:
    levels = {level.level: level for level in sweep_levels(_curve(60, 170, 100, 30), CACHES)}
    assert levels["l1"].out_of_order and "below l2" in levels["l1"].out_of_order
    assert levels["l2"].out_of_order is None and levels["dram"].out_of_order is None


def test_out_of_order_names_the_fastest_farther_level() -> None:
    flags = out_of_order({"l1": 44e9, "l2": 121e9, "llc": 90e9, "dram": 50e9})
    assert set(flags) == {"l1"} and "below l2 121.0 GB/s" in flags["l1"] and OUT_OF_ORDER_TEXT in flags["l1"]
    assert set(out_of_order({"l1": 40e9, "l2": 100e9, "dram": 45e9})) == {"l1"}
    assert set(out_of_order({"l1": 300e9, "l2": 30e9, "dram": 45e9})) == {"l2"}  # any level below DRAM
    assert out_of_order({"l1": 300e9, "l2": None, "dram": 30e9}) == {}
    roofs = out_of_order_roofs({"l1.copy": 60e9, "l2.copy": 170e9, "l1.read": 300e9, "l2.read": 200e9})
    assert set(roofs) == {"l1.copy"} and roofs["l1.copy"].startswith("l1.copy 60.0 GB/s below l2.copy")


def _memory(level: str, kernel: str, rate: float, footprint: int = 64 * KiB, sweep: bool = False) -> Measurement:
    parameters: dict[str, object] = {"kernel": kernel, "dtype": "fp64", "footprint_bytes": footprint, "threads": 2}
    if sweep:
        parameters["sweep"] = True
    return Measurement(
        kind="memory", name=f"memory {kernel}", device="cpu", status="ok", level=level or None,
        parameters=parameters, bytes_per_s=rate, statistic="best", n=3,
    )  # fmt: skip


def test_probe_ceilings_carry_the_flag_and_the_chart_does_not_draw_them() -> None:
    measurements = [
        _memory("l1", "copy", 60e9), _memory("l2", "copy", 170e9), _memory("dram", "copy", 30e9),
        _memory("l1", "triad", 400e9), _memory("dram", "triad", 30e9),
    ]  # fmt: skip
    ceilings = {c.name: c for c in derive_ceilings(measurements)}
    assert ceilings["l1.copy"].out_of_order and "below l2.copy" in ceilings["l1.copy"].out_of_order
    assert ceilings["l2.copy"].out_of_order is None and ceilings["l1.triad"].out_of_order is None
    document = empty_results(device="cpu", devices=[Device(device="cpu", type="cpu")])
    document.ceilings = list(ceilings.values())
    model = build_model([("run.json", document)], datasheet=False)
    (device,) = model.devices
    names = {roof.name for roof in device.roofs}
    assert "l1.copy" not in names and {"l2.copy", "l1.triad"} <= names
    assert set(device.out_of_order) == {"l1.copy"}
    picture = layout_roofline(model, all_roofs=True)
    assert any("l1.copy" in note and "out of order" in note for note in picture.notes)


def test_an_older_file_without_the_flag_is_checked_when_read() -> None:
    ceilings = derive_ceilings([_memory("l1", "copy", 60e9), _memory("l2", "copy", 170e9)])
    for ceiling in ceilings:
        ceiling.out_of_order = None  # written before the field existed
    document = empty_results(device="cpu", devices=[Device(device="cpu", type="cpu")])
    document.ceilings = ceilings
    (device,) = build_model([("old.json", document)], datasheet=False).devices
    assert set(device.out_of_order) == {"l1.copy"} and [r.name for r in device.roofs] == ["l2.copy"]


def test_sweeps_are_derived_from_sweep_measurements_only() -> None:
    curve = _curve(400, 200, 100, 30)
    measurements = [_memory("", "copy", p.bytes_per_s, int(p.footprint_bytes), sweep=True) for p in curve]
    measurements += [_memory("l1", "triad", 400e9, sweep=False)]
    caches = [
        CacheLevel(level=1, kind="Data", size_bytes=32 * KiB, instances=2),
        CacheLevel(level=1, kind="Instruction", size_bytes=32 * KiB, instances=2),
        CacheLevel(level=2, kind="Unified", size_bytes=1 * MiB, instances=2),
        CacheLevel(level=3, kind="Unified", size_bytes=32 * MiB, instances=1),
    ]
    devices = [Device(device="cpu", type="cpu", caches=caches, last_level_cache_bytes=32 * MiB)]
    (sweep,) = derive_sweeps(measurements, devices)
    assert sweep.kernel == "copy" and sweep.threads == 2 and len(sweep.points) == len(curve)
    assert [level.status for level in sweep.levels] == ["ok"] * 4
    assert derive_sweeps(measurements[:5], devices) == []  # too few sizes for a sweep


def _sweep_file(tmp_path: Path, rates: tuple[float, float, float, float]) -> Path:
    """A results file whose only measurements are a copy sweep with these level rates (GB/s)."""
    import msgspec

    measurements = [_memory("", "copy", p.bytes_per_s, int(p.footprint_bytes), sweep=True) for p in _curve(*rates)]
    caches = [
        CacheLevel(level=1, kind="Data", size_bytes=32 * KiB, instances=2),
        CacheLevel(level=2, kind="Unified", size_bytes=1 * MiB, instances=2),
        CacheLevel(level=3, kind="Unified", size_bytes=32 * MiB, instances=1),
    ]
    devices = [Device(device="cpu", type="cpu", caches=caches, last_level_cache_bytes=32 * MiB)]
    document = empty_results(device="cpu", devices=devices, measurements=measurements)
    path = tmp_path / "sweep.json"
    path.write_bytes(msgspec.json.encode(document))  # no `sweeps`: an older file, derived when read
    return path


def test_roofline_sweep_draws_the_chart_and_the_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuscope.cli import main

    path = _sweep_file(tmp_path, (400, 150, 150, 30))
    assert main(["roofline", "--sweep", "--probes", str(path), "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert "Working-set sweep, cpu, 2 threads" in out and "L1" in out and "LLC" in out
    assert NO_PLATEAU in out and "400 GB/s" in out
    assert main(["roofline", "--sweep", "--json", "--probes", str(path)]) == 0
    (sweep,) = __import__("json").loads(capsys.readouterr().out)
    assert sweep["kernel"] == "copy" and len(sweep["levels"]) == 4


def test_roofline_sweep_without_a_sweep_says_what_to_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuscope.cli import main

    path = tmp_path / "none.json"
    import msgspec

    path.write_bytes(msgspec.json.encode(empty_results(device="cpu")))
    assert main(["roofline", "--sweep", "--probes", str(path)]) != 0
    assert "probe --suite sweep" in capsys.readouterr().err


def test_the_report_shows_the_sweep_and_flags_out_of_order_ceilings(tmp_path: Path) -> None:
    import msgspec

    from gpuscope.report.html import render_html
    from gpuscope.report.io import ResultsInput
    from gpuscope.report.markdown import render_markdown
    from gpuscope.report.model import build_report

    path = _sweep_file(tmp_path, (400, 200, 100, 30))
    document = msgspec.json.decode(path.read_bytes(), type=Results)
    document.ceilings = derive_ceilings([_memory("l1", "copy", 60e9), _memory("l2", "copy", 170e9)])
    report = build_report([ResultsInput("run.json", document, msgspec.to_builtins(document))])
    (flagged,) = [c for c in report.ceilings if c.out_of_order]
    assert flagged.name == "l1.copy"
    assert any("slower than a level farther from the core" in line for line in report.summary or [])
    markdown = render_markdown(report)
    assert "## Working-set sweeps" in markdown and "OUT OF ORDER" in markdown
    html = render_html(report)
    assert 'id="sweeps"' in html and "Working-set sweep, cpu" in html


def test_compare_lists_out_of_order_ceilings() -> None:
    from gpuscope.report.compare import compare_results, render_compare_markdown

    documents = []
    for label, l1 in (("a.json", 60e9), ("b.json", 400e9)):
        document = empty_results(device="cpu", devices=[Device(device="cpu", type="cpu")])
        document.ceilings = derive_ceilings([_memory("l1", "copy", l1), _memory("l2", "copy", 170e9)])
        documents.append((label, document))
    result = compare_results(documents)
    (line,) = result["out_of_order"]
    assert line.startswith("a.json: cpu l1.copy 60.0 GB/s below l2.copy")
    assert "Out of order" in render_compare_markdown(result)


def test_a_plateau_past_the_os_size_says_so() -> None:
    # L2 and the LLC at one rate: the plateau named l2 runs far past the 1 MiB the OS reports
    levels = {level.level: level for level in sweep_levels(_curve(400, 150, 150, 30), CACHES)}
    merged = levels["l2"]  # the range with most of the plateau's points (ties go to the nearer level)
    assert merged.status == "ok" and levels["llc"].status == NO_PLATEAU
    assert merged.capacity_ratio is not None and merged.capacity_ratio > 1.5
    assert merged.note and "past the size the OS reports" in merged.note
    assert levels["l1"].note is None and levels["dram"].note is None
