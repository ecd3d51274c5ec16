"""Issue 28: ``report --redact`` redacts the document, so no output carries a host, user or path.

The report is made in a private UTS namespace (``unshare --uts --map-root-user``, which needs no
root) whose hostname is hostile: short (``vm``, ``n7``) or full of HTML/Markdown metacharacters.
The results file names a user, a home folder, a suite path under /tmp/<host>/ and a command line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.reports import make_log_samples, make_results, write_log, write_results

REPO = Path(__file__).resolve().parents[1]
USER = "mallory_q"
SECRET = "--token=hunter2"


def _namespaces_work() -> str | None:
    """None when an unprivileged UTS namespace can be made here, else why not."""
    if not shutil.which("unshare"):
        return "unshare is not installed"
    try:
        done = subprocess.run(
            ["unshare", "--uts", "--map-root-user", "hostname", "probe-ns"], capture_output=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare failed: {error}"
    if done.returncode != 0:
        return "unprivileged user namespaces are unavailable: " + done.stderr.decode(errors="replace").strip()
    return None


_WHY = _namespaces_work()
needs_namespace = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    for name in ("GPUSCOPE_FAKE_NVML", "NO_COLOR"):
        env.pop(name, None)
    return env


def _report_in_namespace(tmp_path: Path, hostname: str, with_log: bool) -> dict[str, str]:
    """Write a results file (and a log) naming ``hostname``, report it redacted as json/html/md from a
    UTS namespace named ``hostname``, and return each output's text."""
    document = make_results(hostname=hostname)
    document["system"] = {**document.get("system", {}), "hostname": hostname, "user": USER}
    document["suite"] = {"name": "quick", "path": f"/tmp/{hostname}/suite.toml"}
    document["argv"] = ["gpuscope", "probe", f"/home/{USER}/suite.toml", SECRET]
    document.setdefault("warnings", []).append(f"ran on {hostname} as {USER} in /home/{USER}/work")
    write_results(tmp_path / "a.json", document)
    log = ""
    if with_log:
        write_log(tmp_path / "run.jsonl", make_log_samples(count=20, hostname=hostname, hostile=True))
        log = "--log run.jsonl"
    (tmp_path / "hostname").write_bytes(hostname.encode())
    gpuscope = f"{sys.executable} -m gpuscope"
    script = (
        'cat hostname > /proc/sys/kernel/hostname && test "$(cat /proc/sys/kernel/hostname)" = "$(cat hostname)"'
        f" && for f in json html md; do {gpuscope} report --probes a.json {log} --redact -o out.$f || exit 1; done"
    )
    done = subprocess.run(
        ["unshare", "--uts", "--map-root-user", "sh", "-c", script],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return {fmt: (tmp_path / f"out.{fmt}").read_text(encoding="utf-8") for fmt in ("json", "html", "md")}


def _forms(name: str) -> list[str]:
    """``name`` as each output may spell it: plain, HTML-escaped, JSON-escaped, Markdown-escaped."""
    import html

    forms = {name, html.escape(name), html.escape(name, quote=False), json.dumps(name)[1:-1]}
    forms.add(re.sub(r"([\\`*_{}\[\]()#+\-.!|<>&])", r"\\\1", name))
    return sorted(forms)


@needs_namespace
@pytest.mark.parametrize("hostname", ["vm", "n7"])
def test_short_hostname_is_nowhere(tmp_path: Path, hostname: str) -> None:
    """A machine called vm or n7: the name is in no title, heading, summary, path or table, in any format; the user,
    the home folder and the command line are gone too; host-1 stands in its place."""
    outputs = _report_in_namespace(tmp_path, hostname, with_log=True)
    word = re.compile(rf"(?<![^\W_]){hostname}(?![^\W_])", re.IGNORECASE)
    for fmt, text in outputs.items():
        hits = [text[max(m.start() - 40, 0) : m.end() + 40] for m in word.finditer(text)][:3]
        assert not hits, (fmt, hits)
        assert USER not in text and "mallory" not in text, fmt
        assert "hunter2" not in text, fmt
        assert f"/tmp/{hostname}" not in text, fmt
        assert "host-1" in text, fmt
    report = json.loads(outputs["json"])
    assert report["redacted"] is True
    assert report["title"] == "gpuscope report: host-1"


@needs_namespace
@pytest.mark.parametrize("hostname", ["<b>x&y</b>", "*bad*_[n](7)`|#"])
def test_hostname_with_metacharacters_is_nowhere(tmp_path: Path, hostname: str) -> None:
    """A hostname made of HTML or Markdown metacharacters appears in no output, in no escaping."""
    outputs = _report_in_namespace(tmp_path, hostname, with_log=False)
    for fmt, text in outputs.items():
        left = [form for form in _forms(hostname) if form in text]
        assert not left, (fmt, left)
        assert "host-1" in text, fmt
