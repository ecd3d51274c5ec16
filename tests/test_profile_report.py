"""A profile in the report ("Where the time goes", energy, the energy roofline), in the browser,
and in ``gpuscope compare``."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from results_files import new_document as new_results  # noqa: E402
from results_files import results_json  # noqa: E402

from gpuscope.cli import main  # noqa: E402
from gpuscope.profiling.api import profile  # noqa: E402
from gpuscope.profiling.compare import profile_comparison  # noqa: E402
from gpuscope.profiling.energy_roofline import (  # noqa: E402
    attainable_flop_per_j,
    energy_balance_flop_per_byte,
    energy_roofs_from_ceilings,
)
from gpuscope.report import write_report  # noqa: E402
from gpuscope.report.profile_section import energy_section_html, profile_section_html  # noqa: E402
from gpuscope.results import read_results, to_results  # noqa: E402
from gpuscope.schema.report import EmbeddedResults  # noqa: E402


def _embedded(document: dict, label: str = "r") -> list[EmbeddedResults]:
    """A report's results: one document, checked as the report checks it."""
    return [EmbeddedResults(label=label, document=to_results(document, label))]


def _roofs_file(path: Path, energy: bool = False) -> Path:
    document = new_results(system={"hostname": socket.gethostname()})
    document["devices"] = [{"device": "cpu", "type": "cpu"}]
    document["ceilings"] = [
        {
            "device": "cpu",
            "kind": "compute",
            "name": "fp32",
            "value": 50e9,
            "unit": "FLOP/s",
        },
        {
            "device": "cpu",
            "kind": "memory",
            "name": "dram.triad",
            "value": 10e9,
            "unit": "B/s",
        },
    ]
    if energy:  # 100 W during the compute ceiling, 80 W during the DRAM one, over 2 s each
        document["ceilings"][0].update(energy_j=200.0, energy_window_s=2.0)
        document["ceilings"][1].update(energy_j=160.0, energy_window_s=2.0)
    path.write_text(json.dumps(document))
    return path


def _step() -> None:
    x = torch.ones(48, 48)
    torch.mm(x, x).relu_().sum()


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("profile-report")
    results = _roofs_file(folder / "results.json", energy=True)
    profile(
        _step,
        name="tiny step",
        steps=1,
        warmup=0,
        device="cpu",
        roofs=[results],
        results=results,
        powercap_root=folder / "none",
    )
    return results


def test_where_the_time_goes_section_renders(profiled: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    write_report(out, [profiled])
    html = out.read_text(encoding="utf-8")
    assert '<section id="where-time-goes">' in html and 'href="#where-time-goes"' in html
    section = html[html.index('<section id="where-time-goes">') :]
    section = section[: section.index("</section>")]
    assert "tiny step" in section and 'id="table-profile-1"' in section
    assert "mm fp32 48x48, 48x48" in section
    assert "<svg" in section  # the groups' roofline
    assert "no powercap interface" in section
    assert '<section id="energy-roofline">' in html


def test_energy_roofline_from_ceilings_with_energy(profiled: Path) -> None:
    document = results_json(profiled)
    (roofs,) = energy_roofs_from_ceilings(read_results(profiled).ceilings)
    assert roofs.j_per_flop == pytest.approx(100.0 / 50e9)
    assert roofs.j_per_byte == pytest.approx(80.0 / 10e9)
    assert (
        roofs.balance_flop_per_byte
        == pytest.approx(4.0)
        == energy_balance_flop_per_byte(roofs.j_per_flop, roofs.j_per_byte)
    )
    assert attainable_flop_per_j(4.0, roofs.j_per_flop, roofs.j_per_byte) == pytest.approx(0.5 / roofs.j_per_flop)
    html = energy_section_html(_embedded(document))
    assert html is not None and "energy balance point 4 FLOP/byte" in html and "<svg" in html


def test_no_profile_no_section() -> None:
    document = new_results()
    assert profile_section_html(_embedded(document, "x")) is None
    assert energy_section_html(_embedded(document, "x")) is None


def test_report_section_in_chromium(profiled: Path, tmp_path: Path) -> None:
    browser = next(
        (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)),
        None,
    )
    if browser is None:
        pytest.skip("no chromium on this machine")
    out = tmp_path / "report.html"
    write_report(out, [profiled])
    png = tmp_path / "shot.png"
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chr'}",
        "--window-size=1280,4000",
        f"--screenshot={png}",
        "--enable-logging=stderr",
        "--v=0",
        out.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert png.exists(), done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Refused to" in line]
    assert console == []


def test_compare_two_profiles_group_by_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "both.json"
    x = torch.ones(32, 32)
    profile(
        torch.mm,
        x,
        x,
        name="step",
        steps=1,
        warmup=0,
        device="cpu",
        results=results,
        powercap_root=tmp_path / "none",
    )
    y = torch.ones(64, 64)
    profile(
        torch.mm,
        y,
        y,
        name="step",
        steps=1,
        warmup=0,
        device="cpu",
        results=results,
        powercap_root=tmp_path / "none",
    )
    (pair,) = profile_comparison([("both", read_results(results))])
    statuses = {row["label"]: row["status"] for row in pair["groups"]}
    assert statuses["mm fp32 32x32, 32x32"] == "gone" and statuses["mm fp32 64x64, 64x64"] == "new"
    assert pair["step_speedup"] is not None
    assert main(["compare", str(results)]) == 0
    out = capsys.readouterr().out
    assert "profile step: both.json -> both.json" in out and "mm fp32 64x64, 64x64" in out


def test_profile_reads_back_as_points_and_rows(profiled: Path) -> None:
    from gpuscope.profiling.stored import profiled_workloads
    from gpuscope.profiling.view import profile_points, profile_rows
    from gpuscope.roofline.model import DeviceKey

    (profiled_step,) = profiled_workloads(read_results(profiled))
    key = DeviceKey(socket.gethostname(), None, "cpu")
    points, rows = profile_points(profiled_step.profile, key), profile_rows(profiled_step.profile)
    assert len(points) == len(rows) == len(profiled_step.profile.groups[:10])
    mm = next(index for index, row in enumerate(rows) if row[1].startswith("mm fp32 48x48"))
    assert points[mm].flops == 2 * 48**3 and points[mm].flop_per_s is not None
    assert all(p.flop_per_s is None for p, row in zip(points, rows, strict=True) if p.flops == 0)


def test_markdown_report_has_the_section(profiled: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    write_report(out, [profiled])
    text = out.read_text(encoding="utf-8")
    assert "## Where the time goes" in text
    assert "| op dtype shapes |" in text and "mm fp32 48x48, 48x48" in text


def test_malformed_profile_objects_read_as_plain_workloads_in_report_and_compare() -> None:
    """A profile object this version cannot read (gpuscope.profiling.stored) is no profile: the
    report and compare leave it out; nothing crashes."""
    bad_groups = [
        5,
        {"op": {"x": 1}, "shapes": [[1, {"a": 2}], "s"], "modules": 7, "time_s": "fast", "label": None},
        {"op": "aten::mm", "modules": "abc"},
    ]
    documents = []
    for groups in (bad_groups, {"not": "a list"}):
        document = new_results()
        document["workloads"] = [
            {
                "name": "s",
                "device": "cpu",
                "flops": 1,
                "bytes": 1,
                "time_s": 1,
                "source": "profile",
                "profile": {"groups": groups, "modules": 3},
            }
        ]
        documents.append(("x", to_results(document, "x")))
    results = [EmbeddedResults(label=label, document=document) for label, document in documents]
    assert profile_section_html(results) is None
    from gpuscope.report.profile_section import profile_markdown_lines

    assert profile_markdown_lines(results, str) == []
    assert profile_comparison(documents) == []


def test_profile_tables_are_the_reports_tables_with_hostile_text_escaped() -> None:
    from support.profiles import profile_results
    from support.reports import HOSTILE

    document = profile_results()
    workload = next(w for w in document["workloads"] if w.get("profile"))
    workload["profile"]["groups"][0]["label"] = HOSTILE + ' "quoted" ' + "x" * 300
    html = profile_section_html(_embedded(document))
    assert html is not None and HOSTILE not in html
    table = html[html.index('<table id="table-profile-1">') :]
    table = table[: table.index("</table>")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &quot;quoted&quot;" in table
    # cells cut to the report tables' 200 characters, by the report's table renderer
    assert "x" * 150 + "…" in table and "x" * 200 not in table


def test_profile_tables_write_numbers_alike() -> None:
    from support.profiles import profile_results

    from gpuscope.profiling.stored import read_profile
    from gpuscope.profiling.view import group_numbers, profile_rows

    document = profile_results()
    workload = next(w for w in document["workloads"] if w.get("profile"))
    group = workload["profile"]["groups"][0]
    group.update(time_s=1.2346, time_lost_s=0.0123456, efficiency=12.0, step_speedup=1.5)
    assert group_numbers(1.2346, 2.0, 12.0, 0.0123456, 1.5) == ("1235", "62%", "999%", "12.3", "1.50x")
    # the TUI's rows and the report's table: the same cells for the same group
    stored = read_profile(workload["profile"])
    assert stored is not None and profile_rows(stored)[0][4:] == ("1235", "999%", "12.3", "1.50x")
    html = profile_section_html(_embedded(document))
    assert html is not None
    first_row = html[html.index("<tbody>", html.index('id="table-profile-1"')) :].split("</tr>")[0]
    rank, ms, _share, *rest = re.findall(r'<td class="num">([^<]*)</td>', first_row)
    assert (rank, ms, *rest) == ("1", "1235", "999%", "12.3", "1.50x")
