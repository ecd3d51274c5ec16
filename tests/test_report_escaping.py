"""Hostile names stay text in every format (also inside matplotlib's SVG), and --redact drops
hostnames, usernames and command lines everywhere."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from support.reports import HOSTILE, make_log_samples, make_results, write_log, write_results

from gpuscope.report import make_report, render_report, write_report
from gpuscope.report.markdown import md_escape
from gpuscope.report.redact import redact_report

EVIL_HOST = '<img src=x onerror="alert(2)">'


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    results = folder / "results.json"
    doc = make_results(hostname=EVIL_HOST, hostile=True)
    doc["system"]["cpu_model"] = "CPU ]]> --></svg><script>alert(3)</script>"
    doc["system"]["blas"] = "| broken | table |\n# heading"
    doc["devices"][1]["name"] = "NVIDIA H100 80GB HBM3 $\\frac{1}{0}$"
    write_results(results, doc)
    log = folder / "telemetry.jsonl"
    write_log(log, make_log_samples(count=20, hostile=True, hostname=EVIL_HOST))
    return results, log


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.handlers.extend(name for name, _ in attrs if name.startswith("on"))

    def handle_data(self, data):
        self.text.append(data)


def test_hostile_names_stay_text_in_html(hostile, tmp_path):
    results, log = hostile
    out = tmp_path / "report.html"
    write_report(out, [results], log_path=log)
    text = out.read_text(encoding="utf-8")
    parser = _Elements()
    parser.feed(text)
    assert "script" not in parser.tags
    assert "img" not in parser.tags
    assert parser.handlers == []
    visible = "".join(parser.text)
    # the names are there, as text: in the process table, the title, the workload table and the SVG
    assert visible.count(HOSTILE) >= 4
    assert EVIL_HOST in visible
    svg_texts = re.findall(r"<text[^>]*>([^<]*)</text>", text)
    assert any("&lt;script&gt;alert(1)" in t for t in svg_texts)  # escaped by matplotlib (and shortened)
    assert "$\\frac{1}{0}$" in visible  # mathtext is off: dollars are text, no crash


def test_hostile_names_stay_text_in_markdown(hostile):
    results, log = hostile
    text = render_report(make_report([results], log), "md")
    assert "<script" not in text and "<img" not in text and "<svg" not in text.lower().replace("&lt;/svg", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    # the BLAS value with pipes and a newline stays inside its cell
    line = next(line for line in text.splitlines() if line.startswith("| BLAS |"))
    assert line.count("|") - line.count("\\|") == 3
    assert "\n# heading" not in text


def test_md_escape():
    assert md_escape("a|b") == "a\\|b"
    assert md_escape("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert md_escape("# not a heading") == "\\# not a heading"
    assert md_escape("1. not a list") == "1\\. not a list"
    assert md_escape("12.8") == "12.8"
    assert "https://" not in md_escape("see https://evil.example")
    assert "@" not in md_escape("@everyone")
    assert md_escape("line\nbreak") == "line\\\\nbreak"  # safe_text's \n, its backslash escaped


def test_hostile_names_stay_text_in_json(hostile, tmp_path):
    results, log = hostile
    out = tmp_path / "report.json"
    write_report(out, [results], log_path=log)
    data = json.loads(out.read_text())
    assert data["systems"][0]["host"] == EVIL_HOST  # kept verbatim: JSON is data, not markup


SECRETS = ("alice", "mallory", "hunter2", "secret-token", "--token", "onerror", "node-a", "/home/alice")


@pytest.mark.parametrize("fmt", ["html", "md", "json"])
def test_redact_drops_hostnames_usernames_and_command_lines(hostile, tmp_path, fmt):
    results, log = hostile
    doc = make_results(hostname="gpu-node-17.cluster.example", hostile=True)
    plain = tmp_path / "plain.json"
    write_results(plain, doc)
    plain_log = tmp_path / "plain.jsonl"
    write_log(plain_log, make_log_samples(count=10, hostile=True, hostname="gpu-node-17.cluster.example"))
    for source, telemetry, host in ((results, log, EVIL_HOST), (plain, plain_log, "gpu-node-17")):
        out = tmp_path / f"report-{host[:3]}.{fmt}"
        write_report(out, [source], log_path=telemetry, redact=True)
        text = out.read_text(encoding="utf-8")
        for secret in (*SECRETS, host):
            assert secret not in text, (secret, fmt)
        assert "host-1" in text
        if fmt == "html":
            assert "redacted" in text
    # the process keeps its executable's name, not its arguments
    data = redact_report(make_report([plain], plain_log))
    process = data["telemetry"]["processes"][0]
    assert process["user"] == "[user]"
    assert "hunter2" not in process["name"] and process["name"]


def test_redact_is_consistent_and_idempotent():
    a = make_results(hostname="alpha-node")
    b = make_results(hostname="beta-node")
    report = make_report([a, b])
    once = redact_report(report)
    twice = redact_report(once)
    assert once == twice
    hosts = {system["host"] for system in once["systems"]}
    assert hosts == {"host-1", "host-2"}
    assert "alpha-node" not in json.dumps(once) and "beta-node" not in json.dumps(once)
    assert once["redacted"] is True
