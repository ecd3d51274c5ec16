"""The wheel ships probes/ and themes/, and ``gpuscope --help`` stays light."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHIPPED = ("probes", "themes")


def _repo_files(name: str) -> list[str]:
    folder = REPO / name
    return sorted(
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.name != ".gitkeep"
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Build the wheel, install it with --no-deps into a fresh venv, report what it finds."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    if importlib.util.find_spec("hatchling") is not None and importlib.util.find_spec("build") is not None:
        command = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)]
    else:  # pip fetches the build backend itself
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=600)
    wheels = list(dist.glob("gpuscope-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheels[0]),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    script = (
        "import json, gpuscope, gpuscope.resources as r;"
        "print(json.dumps({'package': gpuscope.__file__, 'probes': str(r.suites_dir()), 'themes': str(r.themes_dir()),"
        "'probe_files': sorted(p.relative_to(r.suites_dir()).as_posix()"
        " for p in r.suites_dir().rglob('*') if p.is_file()),"
        "'theme_files': sorted(p.relative_to(r.themes_dir()).as_posix()"
        " for p in r.themes_dir().rglob('*') if p.is_file())}))"
    )
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    result = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp, env=env)
    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(wheels[0]) as archive:
        names = archive.namelist()
    return {"venv": venv, "wheel_names": names, **json.loads(result.stdout)}


@pytest.mark.slow
def test_wheel_installs_outside_the_checkout(installed: dict[str, object]) -> None:
    package = Path(str(installed["package"])).resolve()
    assert Path(str(installed["venv"])).resolve() in package.parents
    assert REPO not in package.parents
    assert any(name.endswith(".dist-info/entry_points.txt") for name in installed["wheel_names"])  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_folders_are_inside_the_wheel_and_found(installed: dict[str, object], name: str) -> None:
    files = _repo_files(name)
    if not files:
        pytest.skip(f"{name}/ is still empty in the checkout; nothing to ship yet")
    names = installed["wheel_names"]
    for relative in files:
        assert f"gpuscope/_shipped/{name}/{relative}" in names  # type: ignore[operator]
    found_dir = Path(str(installed[name]))
    assert found_dir.as_posix().endswith(f"gpuscope/_shipped/{name}")
    assert Path(str(installed["venv"])).resolve() in found_dir.resolve().parents
    found_files = installed["probe_files" if name == "probes" else "theme_files"]
    assert sorted(found_files) == files  # type: ignore[arg-type]


_HELP_IMPORTS = r"""
import contextlib, io, json, sys
sys.argv = ["gpuscope"] + sys.argv[1:]
from gpuscope.cli import main
code = None
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code
heavy = {"torch", "textual", "pynvml", "psutil", "numpy", "matplotlib", "rich", "plotext", "prometheus_client"}
loaded = sorted({m.split(".")[0] for m in sys.modules} & heavy)
print(json.dumps({"code": code, "loaded": loaded, "chars": len(out.getvalue())}))
"""


@pytest.mark.parametrize("args", [["--help"], ["log", "--help"], ["--version"]])
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-c", _HELP_IMPORTS, *args], capture_output=True, text=True, timeout=60, env=env, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["code"] in (0, None)
    assert report["loaded"] == []
    assert report["chars"] > 0
