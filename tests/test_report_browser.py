"""The HTML report in a real headless browser (Debian's chromium): no console errors (so no CSP
violation, no blocked fetch, no script), and screenshots in light and dark mode whose chart
regions are drawn (many pixels in the chart palette), on the right background."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.reports import make_log_samples, make_results, write_log, write_results

from gpuscope.report import write_report

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH, HEIGHT = 1280, 5600

#: Page background and chart series colours (--c0 CPU, --c1 / --c2 the two GPUs) per mode,
#: as in gpuscope/report/html.py.
MODES = {
    "light": {
        "flags": [],
        "background": (255, 255, 255),
        "series": {"c0": (0x1F, 0x5F, 0xBF), "c1": (0xD9, 0x48, 0x0F), "c2": (0x2B, 0x8A, 0x3E)},
    },
    "dark": {
        "flags": ["--force-dark-mode"],
        "background": (0x0F, 0x11, 0x15),
        "series": {"c0": (0x6E, 0xA8, 0xFE), "c1": (0xFF, 0x92, 0x2B), "c2": (0x69, 0xDB, 0x7C)},
    },
}


def _browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium on this machine: `apt-get install -y chromium` (CI's .ci/run installs it)")


def _shoot(browser: str, page: Path, png: Path, profile: Path, flags: list[str], height: int = HEIGHT) -> list[str]:
    """Screenshot ``page``; returns the browser's console messages."""
    command = [
        browser,
        "--headless",
        "--no-sandbox",  # root in containers
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{height}",
        f"--screenshot={png}",
        "--enable-logging=stderr",
        "--v=0",
        *flags,
        page.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert png.exists(), f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Refused to" in line]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("browser")
    results = folder / "results.json"
    write_results(results, make_results(hbm_bytes_per_s=[3.0e12, 2.2e12], hostile=True))
    log = folder / "telemetry.jsonl"
    write_log(log, make_log_samples(count=120, hostile=True))
    out = folder / "report.html"
    write_report(out, [results], log_path=log)
    return out


def _near(pixel: tuple[int, int, int], colour: tuple[int, int, int], tolerance: int = 40) -> bool:
    return sum(abs(a - b) for a, b in zip(pixel, colour)) <= tolerance


def _bands(rows: list[int], gap: int = 300) -> list[tuple[int, int]]:
    """Group row numbers into bands separated by more than ``gap`` empty rows."""
    bands: list[tuple[int, int]] = []
    for row in rows:
        if bands and row - bands[-1][1] <= gap:
            bands[-1] = (bands[-1][0], row)
        else:
            bands.append((row, row))
    return bands


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_report_renders_in_chromium(page, tmp_path, mode):
    from PIL import Image

    browser = _browser()
    settings = MODES[mode]
    png = tmp_path / f"{mode}.png"
    console = _shoot(browser, page, png, tmp_path / "profile", settings["flags"])
    assert console == [], console
    image = Image.open(png).convert("RGB")
    assert image.size == (WIDTH, HEIGHT)
    assert _near(image.getpixel((5, 5)), settings["background"], 6), image.getpixel((5, 5))
    import numpy as np

    data = np.asarray(image, dtype=np.int32)
    counts = {}
    rows: set[int] = set()
    for name, colour in settings["series"].items():
        hits = np.abs(data - np.asarray(colour, dtype=np.int32)).sum(axis=2) <= 40
        counts[name] = int(hits.sum())
        rows.update(int(row) for row in np.nonzero(hits.any(axis=1))[0])
    # charts are drawn: every series colour covers many pixels (lines, markers, labels)
    for name, count in counts.items():
        assert count > 1500, (mode, name, counts)
    # in two separate regions: the roofline and, below the tables, the telemetry panels
    bands = [band for band in _bands(sorted(rows)) if band[1] - band[0] > 200]
    assert len(bands) >= 2, bands
    roofline, telemetry = bands[0], bands[-1]
    assert telemetry[1] - telemetry[0] > 1200  # nine stacked panels
    assert roofline[1] < telemetry[0]


def test_console_errors_are_detected(page, tmp_path):
    """The console check can fail: a page that fetches and runs a script logs CSP errors."""
    browser = _browser()
    broken = tmp_path / "broken.html"
    broken.write_text(
        page.read_text(encoding="utf-8").replace(
            "<main>", '<main><img src="http://127.0.0.1:9/x.png"><script>1</script>', 1
        ),
        encoding="utf-8",
    )
    console = _shoot(browser, broken, tmp_path / "broken.png", tmp_path / "profile", [], height=600)
    assert any("Content Security Policy" in line for line in console), console
