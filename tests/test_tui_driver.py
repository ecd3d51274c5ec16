"""Textual's own Linux driver, as the dashboard runs it: keys reach the app (a lone escape too,
through the parser's timeout) and quitting ends its input thread. Run in a pseudo-terminal, as a
user would."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from tui_samples import samples
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.sources import ScriptedSource

app = GpuscopeApp(ScriptedSource(samples(3)), interval_s=3600, persist_settings=False)
open(sys.argv[2], "w").write(app.driver_class.__name__)
app.run()
open(sys.argv[2], "a").write(" exited")
"""


def _read_until(fd: int, needle: bytes, deadline: float) -> bytes:
    seen = b""
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminal test (Linux)")
def test_keys_reach_the_app_and_quit_ends_the_input_thread(tmp_path: Path) -> None:
    import pty

    report = tmp_path / "driver.txt"
    leader, follower = pty.openpty()
    os.set_blocking(leader, False)
    env = {**os.environ, "GPUSCOPE_CONFIG_DIR": str(tmp_path), "TERM": "xterm-256color", "COLUMNS": "100"}
    env["LINES"] = "30"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(REPO / "tests"), str(report)],
        stdin=follower,
        stdout=follower,
        stderr=follower,  # Textual draws on stderr
        cwd=REPO,
        env=env,
    )
    os.close(follower)
    try:
        shown = _read_until(leader, b"Dashboard", time.monotonic() + 60)
        assert b"Dashboard" in shown, "the app never drew its first frame"
        os.write(leader, b"2")  # a key: the roofline screen
        assert b"Roofline" in _read_until(leader, b"Roofline", time.monotonic() + 30)
        os.write(leader, b"\x1b")  # a lone escape: delivered by the parser's timeout tick
        time.sleep(0.3)
        os.write(leader, b"q")
        _read_until(leader, b"\x00never", time.monotonic() + 1)  # keep the pty drained
        child.wait(timeout=60)  # a thread that never woke would hang the exit here
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(leader)
    assert child.returncode == 0
    assert report.read_text() == "LinuxDriver exited"
