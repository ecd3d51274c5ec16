"""The light install against the full one (issue 37), measured in fresh venvs made by this script.

- Size: `pip install <repo>` (the monitoring install) and `pip install torch==<this torch> <repo>[probes]`
  (probes, measure, profile), each in its own new venv; the size printed is what the install added to
  an empty venv (a fresh venv with pip is about 26 MB here), and the venv's whole size beside it.
  Target: the base install at most 250 MB.
- Start-up: `gpuscope log --help` and `gpuscope serve --help` in both venvs, interleaved run by run,
  median of --repeat. Target: the same time with and without torch (neither imports it).

    .venv/bin/python benchmarks/bench_install_size.py [--repeat 15] [--keep DIR]

Needs the package index (pip downloads the base dependencies; torch comes from the wheel on disk).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE_LIMIT_MB = 250.0


def _size_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total / 1e6


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return path / "bin"


def _pip(bin_dir: Path, *requirements: str) -> None:
    subprocess.run(
        [str(bin_dir / "pip"), "install", "-q", "--disable-pip-version-check", *requirements],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _start_s(bin_dir: Path, *args: str) -> float:
    began = time.perf_counter()
    subprocess.run([str(bin_dir / "gpuscope"), *args], check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--keep", type=Path, default=None, help="make the venvs here and keep them")
    args = parser.parse_args()
    import torch  # the torch of the venv running this script: the wheel pip takes from disk

    torch_version = torch.__version__.split("+")[0]
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="gpuscope-install-"))
    workdir.mkdir(parents=True, exist_ok=True)

    empty = workdir / "empty"
    _venv(empty)
    empty_mb = _size_mb(empty)
    light_bin, full_bin = _venv(workdir / "light"), _venv(workdir / "full")
    _pip(light_bin, str(REPO))
    _pip(full_bin, f"torch=={torch_version}")
    _pip(full_bin, f"{REPO}[probes]")
    light_mb, full_mb = _size_mb(workdir / "light"), _size_mb(workdir / "full")
    has_torch = subprocess.run([str(light_bin / "python"), "-c", "import torch"], capture_output=True).returncode == 0

    print(f"fresh venv (pip only)           {empty_mb:8.0f} MB")
    print(f"pip install gpuscope            {light_mb - empty_mb:8.0f} MB added ({light_mb:.0f} MB venv)"
          f"   torch in it: {has_torch}")  # fmt: skip
    print(
        f"pip install 'gpuscope[probes]'  {full_mb - empty_mb:8.0f} MB added ({full_mb:.0f} MB venv, "
        f"torch {torch_version} CPU)"
    )
    met = light_mb - empty_mb <= BASE_LIMIT_MB and not has_torch
    print(f"base install <= {BASE_LIMIT_MB:.0f} MB without torch: {'met' if met else 'NOT met'}")

    for command in (["log", "--help"], ["serve", "--help"]):
        for bin_dir in (light_bin, full_bin):
            _start_s(bin_dir, *command)  # warm the file cache and the bytecode
        light, full = [], []
        for _ in range(args.repeat):
            light.append(_start_s(light_bin, *command))
            full.append(_start_s(full_bin, *command))
        light_s, full_s = statistics.median(light), statistics.median(full)
        print(f"gpuscope {' '.join(command):12s}  without torch {light_s * 1000:6.1f} ms   with torch "
              f"{full_s * 1000:6.1f} ms   ratio {full_s / light_s:.2f}")  # fmt: skip
    if args.keep is None:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
