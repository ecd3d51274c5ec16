"""Hostile trials of the dashboard (issues 24.6, 36.3, 36.7): signals and a closed terminal, standard
streams that are not a terminal, settings files that are links to devices, FIFOs, broken or
written by a newer gpuscope, and values at and past every range a reader might accept.

The outer boundary: a real ``gpuscope`` in a real terminal (tmux), signalled with ``kill``, its
terminal state read through tmux's format variables (``#{alternate_on}``, ``#{mouse_any_flag}``
...), and real files. Display totality is also tried in process (many values, every screen).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pty
import random
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tui_samples import T0, make_app, sample, shown, tui_env  # noqa: F401 - tui_env is a fixture

from gpuscope.tui import config
from gpuscope.tui.format import (
    fmt_bytes,
    fmt_celsius,
    fmt_duration,
    fmt_flops,
    fmt_gib,
    fmt_mhz,
    fmt_mib,
    fmt_percent,
    fmt_rate,
    fmt_time_of_day,
    fmt_watts,
    si,
)
from gpuscope.tui.widgets.host_extra import fmt_elapsed, fmt_rss

GPUSCOPE = [sys.executable, "-m", "gpuscope"]
SIZE = (120, 40)

# --- a real terminal: tmux -------------------------------------------------------------------

#: tmux's view of the terminal state a TUI must give back.
_STATE = {
    "alternate": "#{alternate_on}",
    "mouse_any": "#{mouse_any_flag}",
    "mouse_all": "#{mouse_all_flag}",
    "mouse_button": "#{mouse_button_flag}",
    "mouse_standard": "#{mouse_standard_flag}",
    "mouse_sgr": "#{mouse_sgr_flag}",
    "cursor": "#{cursor_flag}",
}
#: A shell prompt's terminal: normal screen, no mouse reporting, cursor shown.
RESTORED = {
    "alternate": "0",
    "mouse_any": "0",
    "mouse_all": "0",
    "mouse_button": "0",
    "mouse_standard": "0",
    "mouse_sgr": "0",
    "cursor": "1",
}

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Terminal:
    """``argv`` run by ``sh`` in a 120x40 pane of its own tmux server; its exit status lands in
    ``rc`` and the pane stays open after it (the terminal state is read after the exit)."""

    def __init__(self, folder: Path, argv: list[str], *, hup_trap: str | None = None) -> None:
        self.socket = str(folder / "tmux.sock")
        self.rc_path = folder / "rc"
        # `trap true HUP`: the shell outlives a closed terminal to record the exit status (a trap
        # with a command is not inherited: gpuscope gets the default disposition; `trap '' HUP`
        # is: gpuscope starts with SIGHUP ignored, as under nohup).
        script = (
            f"{f'trap {hup_trap} HUP; ' if hup_trap else ''}{shlex.join(argv)}; "
            f"echo $? > {shlex.quote(str(self.rc_path))}; exec sleep 600"
        )
        width, height = SIZE
        self._tmux("new-session", "-d", "-s", "gs", "-x", str(width), "-y", str(height), "sh", "-c", script)
        self.shell_pid = int(self._tmux("display-message", "-p", "-t", "gs", "#{pane_pid}"))

    def _tmux(self, *args: str) -> str:
        env = {name: value for name, value in os.environ.items() if not name.startswith("TMUX")}
        done = subprocess.run(
            ["tmux", "-S", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=30, env=env
        )
        assert done.returncode == 0, f"tmux {args[0]}: {done.stderr.strip()}"
        return done.stdout.strip()

    def state(self) -> dict[str, str]:
        values = self._tmux("display-message", "-p", "-t", "gs", "\t".join(_STATE.values())).split("\t")
        return dict(zip(_STATE, values))

    def text(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-t", "gs")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "gs", *keys)

    def gpuscope_pid(self) -> int:
        """The shell's child: the gpuscope process."""
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == self.shell_pid:
                    return int(entry.name)
        raise AssertionError("no gpuscope process under the pane's shell")

    def wait(self, ready: Callable[[], bool], what: str, timeout_s: float = 90.0) -> None:
        """Poll until ``ready()`` (liveness on a loaded machine, not a timing assertion)."""
        deadline = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"never {what}; the pane shows:\n{self._last_text()}")
            time.sleep(0.1)

    def _last_text(self) -> str:
        try:
            return self.text()
        except AssertionError as exc:
            return str(exc)

    def wait_drawn(self, needle: str) -> None:
        self.wait(lambda: self.state()["alternate"] == "1" and needle in self.text(), f"drew {needle!r}")

    def exit_status(self) -> int:
        self.wait(lambda: self.rc_path.exists() and self.rc_path.read_text().strip() != "", "exited")
        return int(self.rc_path.read_text())

    def hang_up(self) -> None:
        """Close the terminal: the tmux server and its pane go."""
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=30)

    def close(self) -> None:
        self.hang_up()
        # The shell (by now `exec sleep 600`) outlives a hang-up it trapped: end it, by its id,
        # once its command line says it is still the one this test started.
        try:
            command = Path(f"/proc/{self.shell_pid}/cmdline").read_bytes()
        except OSError:
            return
        if command in (b"sleep\x00600\x00",) or str(self.rc_path).encode() in command:
            try:
                os.kill(self.shell_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Callable[..., Terminal]]:
    opened: list[Terminal] = []

    def open_terminal(argv: list[str], **kwargs: Any) -> Terminal:
        opened.append(Terminal(tmp_path, argv, **kwargs))
        return opened[-1]

    yield open_terminal
    for term in opened:
        term.close()


def _assert_one_clean_exit(term: Terminal) -> None:
    assert term.state() == RESTORED
    assert "Traceback" not in term.text()


@needs_tmux
@pytest.mark.slow
@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1"])
def test_signal_to_the_dashboard_gives_the_terminal_back(terminal: Any, name: str) -> None:
    """kill -TERM / -HUP / -INT / -QUIT / -USR1 to a running dashboard in tmux: normal screen, mouse off, exit 0."""
    term = terminal([*GPUSCOPE, "--demo"])
    term.wait_drawn("GPU 0")
    assert term.state()["alternate"] == "1" and term.state()["mouse_any"] == "1"
    os.kill(term.gpuscope_pid(), getattr(signal, name))
    assert term.exit_status() == 0
    _assert_one_clean_exit(term)


@needs_tmux
@pytest.mark.slow
@pytest.mark.parametrize("hup_trap", ["true", "''"], ids=["shell-traps-hup", "hup-ignored"])
def test_closed_terminal_ends_the_dashboard(terminal: Any, hup_trap: str) -> None:
    """tmux kill-server under a dashboard whose shell traps SIGHUP, or with SIGHUP ignored: it ends, exit 0."""
    term = terminal([*GPUSCOPE, "--demo"], hup_trap=hup_trap)
    term.wait_drawn("GPU 0")
    pid = term.gpuscope_pid()
    term.hang_up()
    term.wait(lambda: not Path(f"/proc/{pid}").exists() or _is_zombie(pid), "ended after its terminal closed")
    assert term.exit_status() == 0


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


_RAISING_APP = r"""
import sys
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.demo import DemoSource
from gpuscope.tui.terminal import run_in_terminal


class Failing(GpuscopeApp):
    def on_mount(self) -> None:
        super().on_mount()
        self.set_timer(1.0, self.fail)

    def fail(self) -> None:
        if sys.argv[1] == "worker":
            self.run_worker(self.boom, thread=True)
        else:
            self.boom()

    def boom(self) -> None:
        raise RuntimeError("boom from the " + sys.argv[1])


sys.exit(run_in_terminal(Failing(DemoSource(), persist_settings=False)))
"""


@needs_tmux
@pytest.mark.slow
@pytest.mark.parametrize("where", ["worker", "handler"])
def test_exception_in_the_dashboard_gives_the_terminal_back(terminal: Any, tmp_path: Path, where: str) -> None:
    """An exception raised in a thread worker / a timer handler of the running dashboard: terminal restored, exit 1."""
    script = tmp_path / "failing.py"
    script.write_text(_RAISING_APP)
    term = terminal([sys.executable, str(script), where])
    assert term.exit_status() == 1
    assert term.state() == RESTORED
    assert f"boom from the {where}" in term.text()


def _log_with_timestamps(path: Path, timestamps: list[float]) -> Path:
    from gpuscope.telemetry.logfile import sample_to_json_dict

    lines = []
    for step, stamp in enumerate(timestamps):
        record = sample_to_json_dict(sample(step))
        record["timestamp"] = stamp
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


@needs_tmux
@pytest.mark.slow
@pytest.mark.parametrize("stamps", [[1e17, 1e17 + 1], [253402214400.0 - 1, 253402214400.0]], ids=["1e17", "year-9999"])
def test_replay_of_far_future_timestamps_shows_or_refuses_in_one_line(
    terminal: Any, tmp_path: Path, stamps: list[float]
) -> None:
    """replay of a log stamped 1e17 s / year 9999 in tmux: the dashboard draws and q quits (or one line, exit 3)."""
    log = _log_with_timestamps(tmp_path / "far.jsonl", stamps)
    term = terminal([*GPUSCOPE, "replay", str(log)])
    term.wait(lambda: term.rc_path.exists() or "GPU 0" in term.text(), "drew or exited")
    if not term.rc_path.exists():
        term.wait_drawn("GPU 0")
        term.keys("q")
        assert term.exit_status() == 0
    else:  # the reader refuses the range: one line naming the file, exit 3
        assert term.exit_status() == 3
        errors = [line for line in term.text().splitlines() if line.strip()]
        assert len(errors) == 1 and errors[0].startswith("gpuscope: error:") and "far.jsonl" in errors[0]
    _assert_one_clean_exit(term)


_NEWER_SETTINGS = """\
# my gpuscope settings: keep this comment
theme = "gpuscope-dark"  # the dark one, for now
hidden_panels = [
  "cpu",  # noisy on this box
]

# written by gpuscope 9.0, which this one does not know
refresh_hint = true
columns = [1, 2, 3]

[dashboard.gpu_cards]
compact = true  # a newer table
"""


@needs_tmux
@pytest.mark.slow
def test_theme_option_writes_into_a_newer_settings_file_keeping_it(terminal: Any, tmp_path: Path) -> None:
    """gpuscope --theme in tmux over a config.toml with comments and a newer version's keys: only theme changes."""
    settings = Path(os.environ["GPUSCOPE_CONFIG_DIR"]) / "config.toml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(_NEWER_SETTINGS)
    term = terminal([*GPUSCOPE, "--demo", "--theme", "gpuscope-light"])
    term.wait_drawn("GPU 0")
    term.keys("q")
    assert term.exit_status() == 0
    _assert_one_clean_exit(term)
    expected = _NEWER_SETTINGS.replace('theme = "gpuscope-dark"', 'theme = "gpuscope-light"')
    assert settings.read_text() == expected


@needs_tmux
@pytest.mark.slow
def test_settings_link_to_dev_null_in_tmux_is_refused_in_one_line(terminal: Any) -> None:
    """config.toml a symlink to /dev/null, gpuscope --theme in tmux: a one-line notice, keeps running, link kept."""
    settings = Path(os.environ["GPUSCOPE_CONFIG_DIR"]) / "config.toml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.symlink_to("/dev/null")
    term = terminal([*GPUSCOPE, "--demo", "--theme", "gpuscope-light"])
    term.wait_drawn("Settings not saved")
    term.keys("2")  # still answering keys
    term.wait_drawn("Roofline")
    term.keys("q")
    assert term.exit_status() == 0
    _assert_one_clean_exit(term)
    assert os.readlink(settings) == "/dev/null" and stat.S_ISCHR(os.stat("/dev/null").st_mode)


# --- standard streams that are not a terminal ------------------------------------------------


#: How long a process may take to answer before a test gives up on it (liveness on a loaded
#: machine, never a timing assertion).
_LIVENESS_S = 60.0


def _run_with_streams(argv: list[str], tmp_path: Path, stdin: str, stdout: str, stderr: str) -> tuple[int, str]:
    """Run ``argv`` with each stream a terminal (``tty``), a ``file``, ``/dev/null`` (``null``) or
    ``closed``; returns the exit status and what it wrote to standard error."""
    leader, follower = pty.openpty()
    err_file = tmp_path / "stderr.txt"
    opened: list[int] = []

    def fd_for(kind: str, flags: int, path: Path) -> int | None:
        if kind == "tty":
            return follower
        if kind == "closed":
            return None
        fd = os.open(os.devnull if kind == "null" else path, flags | os.O_CREAT, 0o644)
        opened.append(fd)
        return fd

    fds = [
        fd_for(stdin, os.O_RDONLY, tmp_path / "stdin.txt"),
        fd_for(stdout, os.O_WRONLY, tmp_path / "stdout.txt"),
        fd_for(stderr, os.O_WRONLY, err_file),
    ]

    def child_streams() -> None:
        for target, fd in enumerate(fds):
            if fd is None:
                os.close(target)
            else:
                os.dup2(fd, target)

    process = subprocess.Popen(argv, preexec_fn=child_streams, close_fds=True, start_new_session=True)
    os.close(follower)
    for fd in opened:
        os.close(fd)
    seen = b""
    os.set_blocking(leader, False)
    deadline = time.monotonic() + _LIVENESS_S
    while True:
        try:
            chunk = os.read(leader, 65536)
        except BlockingIOError:
            if process.poll() is not None:
                break  # exited, and all it wrote was read
            if time.monotonic() > deadline:  # still running (a dashboard nobody sees): a failure
                process.kill()
                break
            time.sleep(0.05)
            continue
        except OSError:  # EIO: every copy of the terminal's other end is closed
            break
        if not chunk:
            break
        seen += chunk
    code = process.wait(timeout=60)
    os.close(leader)
    written = err_file.read_text() if stderr == "file" else seen.decode(errors="replace").replace("\r\n", "\n")
    return code, written


@pytest.mark.parametrize(
    ("stdin", "stdout", "stderr", "which"),
    [
        ("closed", "tty", "tty", "input"),
        ("null", "tty", "tty", "input"),
        ("tty", "file", "tty", "output"),
        ("tty", "closed", "tty", "output"),
        ("tty", "tty", "file", "error"),
    ],
)
def test_dashboard_without_a_terminal_says_so_in_one_line(
    tmp_path: Path, stdin: str, stdout: str, stderr: str, which: str
) -> None:
    """gpuscope --demo with stdin closed or /dev/null, stdout a file or closed, stderr a file: one line, exit 4."""
    code, written = _run_with_streams([*GPUSCOPE, "--demo"], tmp_path, stdin, stdout, stderr)
    lines = [line for line in written.splitlines() if line.strip()]
    assert code == 4, written
    assert len(lines) == 1 and lines[0].startswith("gpuscope: error:"), written
    assert f"standard {which} is not" in lines[0]
    assert "\x1b[?1049h" not in written  # nothing drawn


def test_replay_without_a_terminal_says_so_in_one_line(tmp_path: Path) -> None:
    """gpuscope replay LOG with stdin from /dev/null: one line, exit 4."""
    log = _log_with_timestamps(tmp_path / "run.jsonl", [T0, T0 + 1])
    code, written = _run_with_streams([*GPUSCOPE, "replay", str(log)], tmp_path, "null", "tty", "tty")
    assert code == 4 and written.strip().startswith("gpuscope: error:") and len(written.strip().splitlines()) == 1


# --- settings files: links to devices, FIFOs, broken, newer ----------------------------------


def _settings_path(tui_env: Path) -> Path:
    tui_env.mkdir(parents=True, exist_ok=True)
    return tui_env / "config.toml"


def _record_notices(app: Any, notices: list[str]) -> None:
    """Append every notification ``app`` shows to ``notices``, as text, as it is posted."""
    notify = app.notify

    def recording(message: str, **kwargs: Any) -> None:
        notices.append(str(message))
        notify(message, **kwargs)

    app.notify = recording


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_settings_written_back_keep_comments_and_a_newer_versions_keys(tui_env: Path) -> None:
    """Theme switch and panel toggle over a config.toml with comments and a newer gpuscope's keys: the rest is kept."""
    path = _settings_path(tui_env)
    path.write_text(_NEWER_SETTINGS)

    async def scenario() -> None:
        app = make_app()
        async with shown(app, SIZE) as pilot:
            app.theme = "gpuscope-high-contrast"
            await pilot.press("m")  # hide the memory panel
            await pilot.pause(0.1)

    _run(scenario())
    expected = _NEWER_SETTINGS.replace('theme = "gpuscope-dark"', 'theme = "gpuscope-high-contrast"').replace(
        '  "cpu",  # noisy on this box\n', '  "cpu",  # noisy on this box\n  "memory",\n'
    )
    assert path.read_text() == expected
    settings, problem = config.load_settings(path)
    assert problem is None and settings.theme == "gpuscope-high-contrast"


@pytest.mark.parametrize("kind", ["link to /dev/null", "FIFO", "link to a FIFO", "directory"])
def test_settings_that_are_not_a_regular_file_are_neither_read_nor_replaced(tui_env: Path, kind: str) -> None:
    """config.toml a link to /dev/null, a FIFO, a link to a FIFO, a directory: starts, one-line notices, file kept."""
    path = _settings_path(tui_env)
    if kind == "link to /dev/null":
        path.symlink_to("/dev/null")
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "link to a FIFO":
        os.mkfifo(tui_env / "pipe")
        path.symlink_to(tui_env / "pipe")
    else:
        path.mkdir()
    before = os.lstat(path)
    notices: list[str] = []

    async def scenario() -> None:
        app = make_app(theme="gpuscope-light")  # --theme is remembered: a save at start
        _record_notices(app, notices)
        async with shown(app, SIZE) as pilot:
            await pilot.press("2")
            await pilot.pause(0.1)
            assert app.theme == "gpuscope-light"  # the choice holds for this run

    _run(scenario())
    saved = [n for n in notices if n.startswith("Settings not saved")]
    assert len(saved) == 1 and "\n" not in saved[0] and "not a regular file" in saved[0]
    after = os.lstat(path)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)


@pytest.mark.parametrize(
    "text", ["hidden_panels = [\n", "= nope\n", b"theme = '\xff'\n", "theme = 'a'\ntheme = 'b'\n", "x = 1\x00\n"]
)
def test_settings_file_that_does_not_read_is_left_as_it_is(tui_env: Path, text: str | bytes) -> None:
    """Invalid TOML / not UTF-8 config.toml, then a theme switch: the file is byte-identical, one-line notice."""
    path = _settings_path(tui_env)
    raw = text.encode() if isinstance(text, str) else text
    path.write_bytes(raw)
    notices: list[str] = []

    async def scenario() -> None:
        app = make_app()
        _record_notices(app, notices)
        async with shown(app, SIZE) as pilot:
            app.theme = "gpuscope-light"
            await pilot.pause(0.1)

    _run(scenario())
    assert path.read_bytes() == raw
    saved = [n for n in notices if n.startswith("Settings not saved")]
    assert len(saved) == 1 and "\n" not in saved[0] and str(path) in saved[0]


@pytest.mark.parametrize(
    "text", ['[theme]\nname = "neon"  # a newer gpuscope\'s table\n', "theme = 5\n", 'hidden_panels = "cpu"\n']
)
def test_settings_key_of_another_type_is_not_replaced(tui_env: Path, text: str) -> None:
    """config.toml whose theme is a table (newer format) or a number, or hidden_panels a string: theme switch, kept."""
    path = _settings_path(tui_env)
    path.write_text(text)
    notices: list[str] = []

    async def scenario() -> None:
        app = make_app()
        _record_notices(app, notices)
        async with shown(app, SIZE) as pilot:
            app.theme = "gpuscope-light"
            await pilot.pause(0.1)
            assert app.theme == "gpuscope-light"

    _run(scenario())
    assert path.read_text() == text
    saved = [n for n in notices if n.startswith("Settings not saved")]
    assert len(saved) == 1 and "not replaced" in saved[0] and "\n" not in saved[0]


@pytest.mark.parametrize("kind", ["sparse 1 GiB file", "config folder is a file"])
def test_settings_too_large_or_unreachable_are_left_as_they_are(
    tui_env: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """config.toml a sparse 1 GiB file, or $GPUSCOPE_CONFIG_DIR a file: starts, one-line notices, nothing written."""
    if kind == "sparse 1 GiB file":
        path = _settings_path(tui_env)
        with path.open("wb") as handle:
            handle.truncate(2**30)
        watched = path
    else:
        watched = tui_env.parent / "not-a-folder"
        watched.write_text("a file\n")
        monkeypatch.setenv("GPUSCOPE_CONFIG_DIR", str(watched))
    before = (watched.stat().st_size, watched.stat().st_mtime_ns)
    notices: list[str] = []

    async def scenario() -> None:
        app = make_app(theme="gpuscope-light")
        _record_notices(app, notices)
        async with shown(app, SIZE) as pilot:
            await pilot.press("c")  # a panel hidden: another save
            await pilot.pause(0.1)

    _run(scenario())
    assert (watched.stat().st_size, watched.stat().st_mtime_ns) == before
    saved = [n for n in notices if n.startswith("Settings not saved")]
    assert saved and all("\n" not in n and "config.toml" in n for n in saved)


def test_theme_file_that_is_a_fifo_is_skipped_not_waited_on(tui_env: Path) -> None:
    """A FIFO named themes/neon.toml: the dashboard starts, says the theme file was skipped."""
    themes = tui_env / "themes"
    themes.mkdir(parents=True)
    os.mkfifo(themes / "neon.toml")
    notices: list[str] = []

    async def scenario() -> None:
        app = make_app(persist_settings=False)
        _record_notices(app, notices)
        async with shown(app, SIZE):
            pass

    _run(scenario())
    assert any("neon.toml" in n and "FIFO" in n for n in notices), notices


# --- every display of any value ----------------------------------------------------------------

_FLOATS = [1e300, -1e300, 1e17, -1e17, float("nan"), float("inf"), float("-inf"), 5e-324, 0.0, -0.0, sys.float_info.max]
_INTS = [0, -1, 1, 2**63 - 1, 2**64, 10**17, -(10**17), 10**400]


def test_formatters_are_total() -> None:
    """Every TUI number formatter fed NaN, infinities, +-1e300, 1e17, 10**400, 5e-324: short text, no exception."""
    formatters = [si, fmt_bytes, fmt_rate, fmt_flops, fmt_percent, fmt_mhz, fmt_watts, fmt_celsius, fmt_mib, fmt_gib]
    formatters += [fmt_time_of_day, fmt_duration, fmt_elapsed, fmt_rss]
    for value in [*_FLOATS, *_INTS]:
        for formatter in formatters:
            text = formatter(value)
            assert isinstance(text, str) and 0 < len(text) <= 16, (formatter.__name__, value, text)
    assert fmt_time_of_day(1e17) == fmt_time_of_day(float("nan")) == "--:--:--"
    assert fmt_time_of_day(T0) == "22:13:20" and fmt_duration(3725.0) == "1:02:05"
    assert si(1e300, "W") == "1e+300 W" and si(3.2e12, "B/s") == "3.20 TB/s" and fmt_percent(float("nan")) == "n/a"


def _extreme(value: Any, rng: random.Random) -> Any:
    """``value`` with each number in it replaced by one of the extremes (bools and text kept)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return rng.choice(_FLOATS)
    if isinstance(value, int):
        return rng.choice(_INTS[:-1])
    if isinstance(value, list):
        return [_extreme(item, rng) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _extreme(getattr(value, f.name), rng) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **fields)
    return value


@pytest.mark.parametrize(("seed", "size"), [(1, (120, 40)), (2, (80, 24)), (3, (160, 48))])
def test_every_screen_shows_samples_of_extreme_values(tui_env: Path, seed: int, size: tuple[int, int]) -> None:
    """Samples whose every number is NaN, +-inf, +-1e300, 1e17 or 2**64 (mixed), on every screen: no exception."""
    from support.roofline import h200_results

    rng = random.Random(seed)

    async def scenario() -> None:
        app = make_app(persist_settings=False, probe_results=[h200_results()])  # the roofline's live point too
        async with shown(app, size) as pilot:
            for _ in range(3):
                for mode in ("dashboard", "roofline", "processes", "probes", "dashboard"):
                    app.switch_mode(mode)
                    for step in range(3):
                        app._deliver(_extreme(sample(50 + step), rng))
                    await pilot.pause(0.05)
                await pilot.press("w")

    _run(scenario())  # run_test raises what the app raised


def test_every_screen_at_terminal_sizes_down_to_nothing(tui_env: Path) -> None:
    """The terminal resized to 1x1, 2x2, 10x3, 300x2, 3x100 and 0x0 with a sample on every screen: no exception."""
    from support.roofline import h200_results

    async def scenario() -> None:
        app = make_app(persist_settings=False, probe_results=[h200_results()])
        async with shown(app, SIZE) as pilot:
            for size in [(1, 1), (2, 2), (10, 3), (300, 2), (3, 100), (0, 0), (80, 24)]:
                await pilot.resize_terminal(*size)
                for mode in ("dashboard", "roofline", "processes", "probes"):
                    app.switch_mode(mode)
                    app._deliver(sample(60))
                    await pilot.pause(0.05)

    _run(scenario())


def test_a_process_listed_twice_on_a_gpu_shows_once(tui_env: Path) -> None:
    """A sample listing one PID twice on one GPU (a log may): the processes screen shows one row, no crash."""
    base = sample(5)
    gpu = base.gpus[0]
    doubled = dataclasses.replace(gpu, processes=[*gpu.processes, gpu.processes[0]])
    twice = dataclasses.replace(base, gpus=[doubled, *base.gpus[1:]])

    async def scenario() -> None:
        from textual.widgets import DataTable

        app = make_app(persist_settings=False)
        async with shown(app, SIZE) as pilot:
            await pilot.press("4")
            app._deliver(twice)
            await pilot.pause(0.2)
            table = app.screen.query_one(DataTable)
            pids = [str(table.get_row_at(row)[1]) for row in range(table.row_count)]
            assert pids.count(str(gpu.processes[0].pid)) == 1

    _run(scenario())


@pytest.mark.parametrize(
    "stamps",
    [[1e17, 1e17 + 1, 1e17 + 2], [0.0, 1e17], [-1e17, 0.0, 1.0], [T0, T0, T0], [1e300, 1e300], [-1e300, 1e300]],
)
def test_replay_of_extreme_timestamps_plays_seeks_and_steps(tui_env: Path, stamps: list[float]) -> None:
    """A replay whose timestamps are 1e17, negative, equal or 1e300: every replay key and screen, no exception."""
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ReplayCursor

    samples = [dataclasses.replace(sample(step), timestamp=stamp) for step, stamp in enumerate(stamps)]

    async def scenario() -> None:
        app = GpuscopeApp(replay=ReplayCursor(samples), persist_settings=False)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(0.2)
            for key in ["space", "right", "left", "right_square_bracket", "left_square_bracket", "plus", "minus"]:
                await pilot.press(key)
            for key in ["end", "home", "space", "2", "4", "1"]:
                await pilot.press(key)
            await pilot.pause(0.1)

    _run(scenario())
