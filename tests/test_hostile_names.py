"""Hostile names (issue 24 class 7, issue 36 classes 1 and 6), tried as real processes.

- Raw terminal controls: names holding an ESC sequence that sets the terminal title and a bidi
  override reach neither the terminal of a command (success lines included) nor the TUI's
  (hostname, process command line, NIC name, replayed names, suite file name), seen in a real
  tmux whose pane title must stay as it was. One rule, gpuscope.textsafe.safe_text.
- File names that are not UTF-8 (bytes) work as paths and are shown escaped (``r\\xff.json``) in
  terminals, JSON, HTML and Markdown.
- ``report --redact`` under Unicode: a hostname written decomposed (NFD, set in a private UTS
  namespace), composed, in capitals or without its accent is gone from every format; short
  hostnames (``vm``, ``n7``) are redacted too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.roofline import h200_results
from support.samples import make_sample
from support.suites import TINY_SUITE

from gpuscope.telemetry.logfile import open_log_writer
from gpuscope.textsafe import safe_text

REPO = Path(__file__).resolve().parent.parent
#: What must never reach a terminal raw.
RAW = set("\x1b\x07\x9b\u202e\u2066\u2069") | {chr(c) for c in range(0xDC80, 0xDD00)}
#: A name that sets the terminal title (OSC 0) and reverses what follows (RLO).
EVIL = "e\x1b]0;PWNED\x07\u202ex"
EVIL_SHOWN = "e\\x1b]0;PWNED\\x07\\u202ex"
#: A file name byte that is not UTF-8, as Python holds it (surrogateescape) and as it is shown.
BYTE = os.fsdecode(b"\xff")
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
needs_tmux = pytest.mark.skipif(not shutil.which("tmux"), reason="needs tmux")
needs_ip = pytest.mark.skipif(not shutil.which("ip"), reason="needs iproute2's ip")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    for name in ("GPUSCOPE_FAKE_NVML", "TMUX", "NO_COLOR"):
        env.pop(name, None)
    env.update(extra)
    return env


def _gpuscope(argv: list[str], cwd: Path, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *argv], capture_output=True, timeout=timeout, env=_env(**extra), cwd=cwd
    )


def _clean(output: bytes) -> str:
    """``output`` decoded; fails when a raw control, bidi override or undecodable byte is in it."""
    text = output.decode("utf-8")  # strict: an undecodable byte would be raw in the terminal
    assert not set(text) & RAW, [char for char in text if char in RAW]
    assert "Traceback" not in text
    return text


def _results(folder: Path, name: str, hostname: str = "gpu-node") -> str:
    (folder / name).write_text(json.dumps(h200_results(hostname)))
    return name


def _log(folder: Path, name: str, **names: str) -> str:
    """A three-sample telemetry log at ``folder/name``; ``names``: gpu, cpu, process, host, nic."""
    with open_log_writer(folder / name) as writer:
        for tick in range(3):
            sample = make_sample(tick, gpus=1, cores=2)
            if "gpu" in names:
                sample.gpus[0].name = names["gpu"]
            if "process" in names:
                sample.gpus[0].processes[0].name = names["process"]
            if "cpu" in names:
                sample.host.cpu_model = names["cpu"]
            if "host" in names:
                sample.host.hostname = names["host"]
            if "nic" in names:
                sample.host.nics[1].name = names["nic"]
            writer.write(sample)
    return name


# --- 24.7 on the command line: success lines ------------------------------------------------------


def test_log_start_and_summary_lines_escape_the_output_name(tmp_path: Path) -> None:
    """`log -o` a name with a title-setting ESC sequence and a bidi override: the start and summary lines show it
    escaped."""
    result = _gpuscope(["log", "--no-gpu", "--interval", "0.2", "--duration", "0.4", "-o", EVIL + ".jsonl"], tmp_path)
    assert result.returncode == 0, result.stderr
    err = _clean(result.stderr)
    assert err.count(EVIL_SHOWN + ".jsonl") == 2, err
    assert (tmp_path / (EVIL + ".jsonl")).stat().st_size > 0


def test_report_wrote_line_escapes_the_output_name(tmp_path: Path) -> None:
    """`report -o` a name with ESC and a bidi override: the "wrote" line shows it escaped."""
    _results(tmp_path, "a.json")
    result = _gpuscope(["report", "--probes", "a.json", "-o", EVIL + ".md"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert _clean(result.stderr).strip() == f"gpuscope: wrote md report {EVIL_SHOWN}.md"


def test_probe_results_line_and_progress_escape_file_names(tmp_path: Path) -> None:
    """`probe --suite` and `-o` named with ESC, a bidi override and a byte that is not UTF-8: every line escaped, the
    results file valid JSON."""
    suite, output = f"s{BYTE}{EVIL}.toml", f"p{BYTE}{EVIL}.json"
    (tmp_path / suite).write_text(TINY_SUITE)
    result = _gpuscope(["probe", "--suite", suite, "-o", output], tmp_path)
    assert result.returncode == 0, result.stderr
    out = _clean(result.stdout)
    _clean(result.stderr)
    assert f"results in p\\xff{EVIL_SHOWN}.json" in out
    document = json.loads((tmp_path / output).read_bytes().decode("utf-8"))  # strict UTF-8
    assert document["suite"]["path"] == f"s\\xff{EVIL_SHOWN}.toml"
    assert f"p\\xff{EVIL_SHOWN}.json" in document["system"]["argv"]


def test_measure_summary_and_output_name_that_is_not_utf8(tmp_path: Path) -> None:
    """`measure --name` with ESC and a bidi override, `-o` a name with a byte that is not UTF-8: the summary escaped,
    the point written."""
    output = f"m{BYTE}.json"
    result = _gpuscope(
        ["measure", "os:getpid", "--samples", "3", "--max-time", "1", "--warmup-max", "0", "--no-telemetry",
         "--name", EVIL, "-o", output],
        tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert EVIL_SHOWN in _clean(result.stdout)
    _clean(result.stderr)
    document = json.loads((tmp_path / output).read_bytes().decode("utf-8"))
    assert [w["name"] for w in document["workloads"]] == [EVIL]  # the data keeps the name; displays escape it


def test_roofline_colours_survive_and_names_do_not(tmp_path: Path) -> None:
    """`roofline --color` of a file whose workload is named with ESC sequences: the chart's SGR colours reach the
    terminal, the name's ESC does not."""
    document = h200_results()
    document["workloads"][0]["name"] = "w\x1b]0;PWNED\x07\x1b[2J\u202e"
    (tmp_path / "a.json").write_text(json.dumps(document))
    result = _gpuscope(["roofline", "--probes", "a.json", "--color", "--width", "120"], tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    assert re.search(r"\x1b\[[0-9;]*m", out), "the chart lost its colours"
    assert not re.search(r"\x1b[^\[]|\x1b\[[0-9;]*[^0-9;m]", out), "an ESC other than a colour reached the terminal"
    assert "\u202e" not in out and "\\x1b]0;PWNED\\x07" in out


def test_every_printed_line_goes_through_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    """A message printed inside a command (the stream guard of cli.main), not escaped by its author, reaches stdout and
    stderr escaped; the streams are put back after."""
    from gpuscope.textsafe import TerminalStream, terminal_streams, write_styled

    with terminal_streams():
        print(f"plain {EVIL}")
        print(f"err {EVIL}", file=sys.stderr)
        write_styled(sys.stdout, "\x1b[31mred\x1b[0m \x1b]0;t\x07\n")
    assert not isinstance(sys.stdout, TerminalStream) and not isinstance(sys.stderr, TerminalStream)
    captured = capsys.readouterr()
    assert captured.out == f"plain {EVIL_SHOWN}\n\x1b[31mred\x1b[0m \\x1b]0;t\\x07\n"
    assert captured.err == f"err {EVIL_SHOWN}\n"


def test_json_on_stdout_stays_the_same_json() -> None:
    """JSON with raw C1, DEL and bidi characters through the stream rule: still JSON, with the same strings."""
    from gpuscope.textsafe import _terminal_text

    document = {"name": "a\x85b\x7fc\u202ed\u2028e"}
    raw = json.dumps(document, ensure_ascii=False)
    shown = _terminal_text(raw)
    assert not set(shown) & RAW and json.loads(shown) == document


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (b"r\xff.json", "r\\xff.json"),
        (Path(os.fsdecode(b"dir/r\xfe.json")), "dir/r\\xfe.json"),
        ("caf\u00e9\u0301", "caf\u00e9\u0301"),  # printable non-ASCII stays as it is
        ("\x1b\x9b\x7f\u2028\ud800", "\\x1b\\u009b\\u007f\\u2028\\ud800"),
    ],
)
def test_safe_text_shows_bytes_paths_and_controls_one_way(value: object, shown: str) -> None:
    """safe_text of bytes, a path holding a byte that is not UTF-8, C1, DEL, a line separator and a lone surrogate: one
    escaped form."""
    assert safe_text(value) == shown
    assert safe_text(shown) == shown


# --- 36.1: file names that are not UTF-8 --------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "html", "md"])
def test_report_reads_and_writes_names_that_are_not_utf8(tmp_path: Path, fmt: str) -> None:
    """`report --probes r\\xff.json --log l\\xfe.jsonl -o o\\xfd.<fmt>`: written, the names shown escaped in the file
    and the terminal."""
    probes = _results(tmp_path, f"r{BYTE}.json")
    log = _log(tmp_path, os.fsdecode(b"l\xfe.jsonl"))
    output = os.fsdecode(f"o\xfd.{fmt}".encode("latin-1"))
    result = _gpuscope(["report", "--probes", probes, "--log", log, "-o", output], tmp_path)
    assert result.returncode == 0, result.stderr
    assert _clean(result.stderr).strip() == f"gpuscope: wrote {fmt} report o\\xfd.{fmt}"
    text = (tmp_path / output).read_bytes().decode("utf-8")  # strict: no raw byte, no surrogate
    # the text a reader sees: JSON strings decoded, Markdown's escaped backslashes rendered
    shown = json.dumps(json.loads(text), ensure_ascii=False) if fmt == "json" else text
    shown = shown.replace("\\\\", "\\") if fmt in ("json", "md") else shown
    assert "r\\xff.json" in shown and "l\\xfe.jsonl" in shown, "the names are not shown escaped"
    assert "\ufffd" not in text
    if fmt == "json":
        document = json.loads(text)
        assert [source["label"] for source in document["sources"]] == ["r\\xff.json", "l\\xfe.jsonl"]
        again = _gpuscope(["report", "--from", output, "-o", "again.html"], tmp_path)  # and it reads back
        assert again.returncode == 0, again.stderr


def test_roofline_and_compare_show_byte_names_escaped(tmp_path: Path) -> None:
    """`roofline` and `compare` of files named with a byte that is not UTF-8: the labels escaped, no traceback."""
    first, second = _results(tmp_path, f"a{BYTE}.json"), _results(tmp_path, f"b{BYTE}.json")
    for argv in (["roofline", "--probes", first, "--probes", second, "--no-color"], ["compare", first, second]):
        result = _gpuscope(argv, tmp_path)
        assert result.returncode == 0, result.stderr
        shown = _clean(result.stdout) + _clean(result.stderr)
        assert argv[0] == "roofline" or "a\\xff.json" in shown, shown


@needs_root
def test_a_hostname_that_is_not_utf8_is_written_and_shown_escaped(tmp_path: Path) -> None:
    """A UTS namespace whose hostname is the bytes h\\xff plus a title-setting ESC sequence: `snapshot` (text and
    --json), `log` (JSON lines and CSV) and `report` show and write it escaped; every file reads back."""
    gpuscope = f"{sys.executable} -m gpuscope"
    _results(tmp_path, "a.json")
    _in_namespace(
        b"h\xff\x1b]0;PWNED\x07",
        f"{gpuscope} snapshot --no-gpu --wait 0.1 > snap.txt 2>&1"
        f" && {gpuscope} snapshot --no-gpu --wait 0.1 --json > snap.json"
        f" && {gpuscope} log --no-gpu --interval 0.2 --duration 0.4 -o run.jsonl 2>/dev/null"
        f" && {gpuscope} log --no-gpu --interval 0.2 --duration 0.4 --format csv -o run.csv 2>/dev/null"
        f" && {gpuscope} report --probes a.json --log run.csv -o csv.md 2>/dev/null"
        f" && {gpuscope} report --probes a.json --log run.jsonl -o r.json 2>/dev/null"
        f" && {gpuscope} report --from r.json -o r.html 2>/dev/null",
        tmp_path,
    )
    shown = "h\\xff\\x1b]0;PWNED\\x07"
    assert _clean((tmp_path / "snap.txt").read_bytes()).startswith(shown)
    import msgspec  # gpuscope's own reader: a lone surrogate escape (\udcff) would be refused

    assert msgspec.json.decode((tmp_path / "snap.json").read_bytes())["record"]["host"]["hostname"] == shown
    first = msgspec.json.decode((tmp_path / "run.jsonl").read_bytes().splitlines()[0])
    assert first["host"]["hostname"] == shown
    assert shown in (tmp_path / "run.csv").read_bytes().decode("utf-8")
    assert msgspec.json.decode((tmp_path / "r.json").read_bytes())["telemetry"]["hostnames"] == [shown]
    (tmp_path / "r.html").read_bytes().decode("utf-8")  # re-rendered from r.json: strict UTF-8


@needs_root
@needs_ip
def test_a_nic_name_that_is_not_utf8_is_sampled_logged_and_exported(tmp_path: Path) -> None:
    """A network namespace with a NIC named with the byte \\xff and a title-setting ESC sequence: `snapshot`, `log`
    (JSON lines and CSV) and the Prometheus exporter keep working and write the name escaped."""
    (tmp_path / "scrape.py").write_text(
        "import time, urllib.request\n"
        "body = b''\n"
        "for _ in range(100):  # until a sample with the NIC's rates was served\n"
        "    try:\n"
        "        body = urllib.request.urlopen('http://127.0.0.1:9477/metrics').read()\n"
        "    except OSError:\n"
        "        pass\n"
        "    if b'gpuscope_nic_receive_bytes_per_second{host=' in body:\n"
        "        break\n"
        "    time.sleep(0.1)\n"
        "open('metrics.txt', 'wb').write(body)\n"
    )
    nic = "$'n\\xff\\x1b]0;N\\x07'"
    gpuscope = f"{sys.executable} -m gpuscope"
    script = (
        "ip link set lo up"
        f" && ip link add name {nic} type veth peer name peer0 && ip link set dev {nic} up && ip link set dev peer0 up"
        f" && {gpuscope} snapshot --no-gpu --wait 0.1 > snap.txt"
        f" && {gpuscope} log --no-gpu --interval 0.2 --duration 0.4 --format csv -o run.csv 2>/dev/null"
        f" && ({gpuscope} log --no-gpu --interval 0.2 --duration 3 --prometheus 127.0.0.1:9477 -o run.jsonl"
        f" 2>/dev/null & {sys.executable} scrape.py; wait)"
    )
    result = subprocess.run(["unshare", "-n", "bash", "-c", script], cwd=tmp_path, env=_env(), capture_output=True)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    _clean((tmp_path / "snap.txt").read_bytes())
    shown = "n\\xff\\x1b]0;N\\x07"
    assert shown in (tmp_path / "run.csv").read_bytes().decode("utf-8")
    import msgspec

    names = [
        nic["name"]
        for nic in msgspec.json.decode((tmp_path / "run.jsonl").read_bytes().splitlines()[0])["host"]["nics"]
    ]
    assert shown in names
    metrics = (tmp_path / "metrics.txt").read_bytes().decode("utf-8")
    assert 'nic="n\\\\xff\\\\x1b]0;N\\\\x07"' in metrics  # Prometheus doubles each backslash


# --- 36.6 and issue 28: redaction ----------------------------------------------------------------

HOST_NFC = "caf\u00e9-gpu-07"


def _forms(name: str) -> set[str]:
    """Every spelling of ``name`` a redacted document must not carry."""
    forms = {unicodedata.normalize(form, name) for form in ("NFC", "NFD", "NFKC", "NFKD")}
    forms |= {form.upper() for form in forms} | {form.casefold() for form in forms}
    forms.add("".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c)))
    return forms


def _in_namespace(hostname: bytes, script: str, cwd: Path) -> None:
    """Run the shell ``script`` in a private UTS namespace whose hostname is ``hostname`` (bytes as given)."""
    (cwd / "hostname").write_bytes(hostname)
    command = f"cat hostname > /proc/sys/kernel/hostname && {script}"
    result = subprocess.run(
        ["unshare", "-u", "sh", "-c", command], cwd=cwd, env=_env(), capture_output=True, timeout=300
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")


@needs_root
@pytest.mark.parametrize(("host_form", "file_form"), [("NFD", "NFC"), ("NFC", "NFD")])
def test_redact_removes_a_hostname_in_every_form_and_format(tmp_path: Path, host_form: str, file_form: str) -> None:
    """`report --redact` in a UTS namespace named café-gpu-07 (NFD, then NFC), its files named after the host in the
    other form: no form of the name in JSON, HTML or Markdown."""
    (tmp_path / "suite.toml").write_text(TINY_SUITE)
    gpuscope = f"{sys.executable} -m gpuscope"
    other = unicodedata.normalize(file_form, HOST_NFC)
    _in_namespace(
        unicodedata.normalize(host_form, HOST_NFC).encode(),
        f"{gpuscope} probe --suite suite.toml -q -o r-{other}.json >/dev/null"
        f" && {gpuscope} log --no-gpu --interval 0.2 --duration 0.4 -o run-{other}.jsonl 2>/dev/null"
        f" && for f in json html md; do {gpuscope} report --probes r-*.json --log run-*.jsonl --redact -o out.$f;"
        " done",
        tmp_path,
    )
    made = json.loads(next(tmp_path.glob("r-*.json")).read_text())
    assert made["system"]["hostname"] == unicodedata.normalize(host_form, HOST_NFC)  # the namespace did its part
    for fmt in ("json", "html", "md"):
        text = (tmp_path / f"out.{fmt}").read_text()
        left = [form for form in _forms(HOST_NFC) if form in text]
        assert not left, (fmt, left)
        assert "host-1" in text


def test_redact_matches_every_spelling_inside_free_text() -> None:
    """Redaction of free text holding the hostname composed, decomposed, in capitals, in full-width letters and without
    its accent: each replaced, other words kept."""
    from gpuscope.report.redact import Redaction

    document = h200_results(HOST_NFC)
    spellings = [
        unicodedata.normalize("NFD", HOST_NFC),
        HOST_NFC.upper(),
        "\uff23\uff21\uff26\u00c9-gpu-07",  # full-width CAFÉ
        "cafe-gpu-07",
        f"{HOST_NFC}.cluster.local",
    ]
    document["warnings"] = [f"ran on {name}: fine" for name in spellings] + ["cafe-gpu-077 is another host"]
    out = Redaction.of([document]).apply(document)
    assert out["system"]["hostname"] == "host-1"
    assert out["warnings"][:4] == ["ran on host-1: fine"] * 4
    assert out["warnings"][4] in ("ran on host-1.cluster.local: fine", "ran on host-1: fine")
    assert out["warnings"][5] == "cafe-gpu-077 is another host"


@pytest.mark.parametrize(
    ("hostname", "written"),
    [("stra\u00dfe-07", "STRASSE-07"), ("\u0130zmir-n1", "izmir-N1"), ("\ufb01ber-3", "fiber-3"), ("n7", "N7")],
)
def test_redact_folds_case_and_ligatures(hostname: str, written: str) -> None:
    """Redaction of a host named straße-07, İzmir-n1, ﬁber-3 (a ligature) or n7 written STRASSE-07, izmir-N1, fiber-3,
    N7 in a warning and a workload name: replaced."""
    from gpuscope.report.redact import Redaction

    document = h200_results(hostname)
    document["warnings"] = [f"slow on {written}"]
    document["workloads"][0]["name"] = f"bench_{written}"
    out = Redaction.of([document]).apply(document)
    assert out["warnings"] == ["slow on host-1"] and out["workloads"][0]["name"] == "bench_host-1"


@needs_root
@pytest.mark.parametrize("hostname", ["vm", "n7"])
def test_redact_removes_short_hostnames(tmp_path: Path, hostname: str) -> None:
    """`report --redact` on a machine named vm or n7 (UTS namespace), suite in /tmp/<name>/: the name is in no title,
    heading, summary or path."""
    document = h200_results(hostname)
    document["suite"] = {"name": "quick", "path": f"/tmp/{hostname}/suite.toml"}
    (tmp_path / "a.json").write_text(json.dumps(document))
    gpuscope = f"{sys.executable} -m gpuscope"
    _in_namespace(
        hostname.encode(),
        f"for f in json html md; do {gpuscope} report --probes a.json --redact -o out.$f; done",
        tmp_path,
    )
    word = re.compile(rf"(?<![^\W_]){hostname}(?![^\W_])", re.IGNORECASE)
    for fmt in ("json", "html", "md"):
        text = (tmp_path / f"out.{fmt}").read_text()
        assert not word.search(text), (fmt, [text[m.start() - 40 : m.end() + 40] for m in word.finditer(text)][:3])
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["title"] == "gpuscope report: host-1" and report["redacted"] is True


def test_redacting_a_report_again_rebuilds_its_title(tmp_path: Path) -> None:
    """`report --from report.json --redact` of an unredacted report of host vm: the title and summary are rebuilt from
    the alias."""
    (tmp_path / "a.json").write_text(json.dumps(h200_results("vm")))
    assert _gpuscope(["report", "--probes", "a.json", "-o", "plain.json"], tmp_path).returncode == 0
    result = _gpuscope(["report", "--from", "plain.json", "--redact", "-o", "red.json"], tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "red.json").read_text())
    assert report["title"] == "gpuscope report: host-1"
    assert not any(re.search(r"\bvm\b", line) for line in report["summary"]), report["summary"]


# --- 24.7 in the TUI, in a real tmux --------------------------------------------------------------


class Tmux:
    """A private tmux server running one gpuscope TUI, optionally in fresh namespaces."""

    TITLE = "untouched"

    def __init__(self, folder: Path, width: int = 160, height: int = 50) -> None:
        self.socket = str(folder / "tmux.sock")
        self.folder, self.width, self.height = folder, width, height
        self.keeper: subprocess.Popen[bytes] | None = None
        self.own_pid_namespace = False

    def tmux(self, *args: str) -> str:
        result = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, timeout=30, env=_env())
        return result.stdout.decode("utf-8", "replace")

    def start(self, argv: list[str], setup: str = "", unshare: tuple[str, ...] = ()) -> None:
        """Run gpuscope ``argv`` in a new tmux session after the shell ``setup`` (in the namespaces
        ``unshare`` names); the pane's title is set first, so a name that sets it shows."""
        launcher = self.folder / "gpuscope.sh"
        launcher.write_bytes(
            " ".join(["exec", sys.executable, "-m", "gpuscope", *(_sh(arg) for arg in argv)]).encode() + b"\n"
        )
        script = (
            f"{setup}\ntmux -S {self.socket} new-session -d -x {self.width} -y {self.height} 'bash {launcher}'\n"
            f"tmux -S {self.socket} select-pane -T {self.TITLE}\n"
            f"while tmux -S {self.socket} has-session 2>/dev/null; do sleep 0.2; done\n"
        )
        (self.folder / "session.sh").write_text(script)
        prefix = ["unshare", *unshare, "--"] if unshare else []
        self.own_pid_namespace = "-p" in unshare
        self.keeper = subprocess.Popen(
            [*prefix, "bash", str(self.folder / "session.sh")], cwd=self.folder, env=_env(TZ="UTC"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J")

    def wait_for(self, text: str, timeout_s: float = 60) -> str:
        """The screen once it shows ``text`` (fails with the last screen after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.3)
        raise AssertionError(f"{text!r} never showed; the screen:\n{screen}")

    def title(self) -> str:
        return self.tmux("display-message", "-p", "#{pane_title}").strip()

    def close(self) -> None:
        pane = self.tmux("display-message", "-p", "#{pane_pid}").strip()
        self.tmux("kill-server")
        # the TUI, should SIGHUP not end it (issue 36.3); in a PID namespace the pid is the
        # namespace's own, and the namespace ends with the keeper
        if pane.isdigit() and not self.own_pid_namespace:
            _reap(int(pane))
        if self.keeper is not None:
            try:
                self.keeper.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.keeper.pid, signal.SIGKILL)
                self.keeper.wait()


def _reap(pid: int) -> None:
    """End process ``pid`` (SIGTERM, then SIGKILL) if it is still running."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        for _ in range(50):
            time.sleep(0.1)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(tmp_path)
    yield session
    session.close()


def _no_raw(screen: str) -> None:
    assert not set(screen) & RAW, [char for char in screen if char in RAW]


def _sh(text: str) -> str:
    """``text`` as a bash $'...' word."""
    return "$'" + "".join(f"\\x{byte:02x}" for byte in text.encode("utf-8", "surrogateescape")) + "'"


@needs_root
@needs_tmux
@needs_ip
def test_tui_hostname_process_and_nic_names_are_shown_escaped(tmux: Tmux) -> None:
    """The TUI in UTS, network and PID namespaces whose hostname, a NIC's name and a process's command line hold a
    title-setting ESC sequence and a bidi override: shown escaped, the pane title untouched."""
    host, nic, process = "h\x1b]0;HOST\x07\u202ex", "\x1b]0;NIC\x07\u202en", "\x1b]0;PROC\x07\u202ep"
    setup = (
        f"printf %s {_sh(host)} > /proc/sys/kernel/hostname\n"
        f"ip link add name {_sh(nic)} type veth peer name peer0 && ip link set dev {_sh(nic)} up"
        " && ip link set dev peer0 up\n"
        f"(exec -a {_sh(process)} sleep 600) &\n"
    )
    tmux.start(["--demo"], setup, ("-u", "-n", "-p", "-f", "--mount-proc"))
    screen = tmux.wait_for("Top processes")
    screen = tmux.wait_for(safe_text(process)[:12])
    for name in (host, process):
        assert safe_text(name)[:12] in screen, name
    screen = tmux.wait_for(safe_text(nic)[:10])  # the network panel
    _no_raw(screen)
    tmux.tmux("send-keys", "4")  # the processes screen, all host processes: full command lines
    tmux.wait_for("GPU MEM")
    tmux.tmux("send-keys", "a")
    screen = tmux.wait_for(safe_text(process) + " 600")
    _no_raw(screen)
    assert tmux.title() == Tmux.TITLE


@needs_tmux
def test_tui_replay_shows_hostile_names_from_a_log_escaped(tmux: Tmux, tmp_path: Path) -> None:
    """`replay` of a log whose GPU, CPU, host, NIC and GPU process names hold ESC sequences and bidi overrides: shown
    escaped, the pane title untouched."""
    names = {
        "gpu": "G\x1b]0;GPU\x07\u202eg",
        "cpu": "C\x1b]0;CPU\x07\u202ec",
        "host": "H\x1b]0;HST\x07\u202eh",
        "process": "P\x1b]0;PRC\x07\u202ep",
        "nic": "N\x1b]0;NIC\x07\u202en",
    }
    _log(tmp_path, "run.jsonl", **names)
    tmux.start(["replay", str(tmp_path / "run.jsonl")])
    screen = tmux.wait_for(safe_text(names["gpu"]))
    for key in ("cpu", "host", "nic"):
        assert safe_text(names[key])[:12] in screen, key
    _no_raw(screen)
    tmux.tmux("send-keys", "4")  # the processes screen: the GPU processes of the log
    _no_raw(tmux.wait_for(safe_text(names["process"])))
    assert tmux.title() == Tmux.TITLE


@needs_tmux
def test_tui_probes_screen_shows_a_hostile_suite_file_name_escaped(tmux: Tmux, tmp_path: Path) -> None:
    """The probes screen offering a suite file named with ESC, a bidi override and a byte that is not UTF-8: shown
    escaped, the pane title untouched."""
    suite = tmp_path / f"s{BYTE}\x1b]0;SUITE\x07\u202ex.toml"
    suite.write_text(TINY_SUITE)
    tmux.start(["--demo", "--suite", str(suite)])
    tmux.wait_for("Dashboard")
    tmux.tmux("send-keys", "3")
    screen = tmux.wait_for("s\\xff\\x1b]0;SUITE")
    _no_raw(screen)
    assert tmux.title() == Tmux.TITLE


@needs_tmux
def test_tui_roofline_screen_with_a_hostile_results_file_name(tmux: Tmux, tmp_path: Path) -> None:
    """The TUI given --probes a results file named with ESC, a bidi override and a byte that is not UTF-8, its workload
    named with ESC sequences: the roofline screen shows both escaped, the pane title untouched."""
    document = h200_results()
    document["workloads"][0]["name"] = "w\x1b]0;WORK\x07\u202ex"
    path = tmp_path / f"r{BYTE}\x1b]0;FILE\x07\u202e.json"
    path.write_text(json.dumps(document))
    tmux.start(["--demo", "--probes", str(path)])
    tmux.wait_for("Dashboard")
    tmux.tmux("send-keys", "2")
    screen = tmux.wait_for("w\\x1b]0;WORK")
    _no_raw(screen)
    assert tmux.title() == Tmux.TITLE
