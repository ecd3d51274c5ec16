"""Security: the exporter binds loopback unless told otherwise; commands read and write only what
the user named (plus the standard config and data folders); reports escape every string a
results file or log can carry; nothing in a suite, theme, configuration or data file is ever
executed (data is parsed, never evaluated; no pickle, no yaml.load, no eval/exec of file content).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "gpuscope"

# --- nothing executes file content ------------------------------------------------------------------

#: Calls that would run code or unpickle objects. Each allowed use names its reason.
_DANGEROUS_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}
_DANGEROUS_ATTRIBUTES = {
    ("pickle", "load"),
    ("pickle", "loads"),
    ("pickle", "Unpickler"),
    ("marshal", "loads"),
    ("marshal", "load"),
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("torch", "load"),
    ("os", "system"),
    ("os", "popen"),
    ("dill", "loads"),
    ("shelve", "open"),
    ("jsonpickle", "decode"),
}
_ALLOWED = {
    # `gpuscope measure path/to/bench.py:fn` runs the user's own module by design: they named it
    ("gpuscope/commands/measure.py", "exec_module"),
    ("gpuscope/commands/measure.py", "import_module"),
    # the CLI dispatcher imports its own command modules by a fixed name
    ("gpuscope/cli.py", "import_module"),
    # the schema generator imports the declared types from a fixed table of its own modules
    ("gpuscope/schema/generate.py", "import_module"),
    # the package loads its public functions on first use, from a fixed table of its own modules
    ("gpuscope/__init__.py", "import_module"),
    # the exporter's web config is YAML (the exporter-toolkit format); read with yaml.safe_load, which builds plain
    # data only (yaml.load and yaml.unsafe_load are still caught as calls)
    ("gpuscope/exporter/webconfig.py", "yaml"),
}


def _python_files() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


def test_no_eval_exec_pickle_or_yaml_load_on_data() -> None:
    found = []
    for path in _python_files():
        relative = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=relative)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [alias.name for alias in node.names] + (
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
                )
                for name in names:
                    if name.split(".")[0] in (
                        "pickle",
                        "marshal",
                        "yaml",
                        "dill",
                        "shelve",
                        "jsonpickle",
                        "cloudpickle",
                    ):
                        if (relative, name) not in _ALLOWED:
                            found.append(f"{relative}:{node.lineno}: imports {name}")
            if not isinstance(node, ast.Call):
                continue
            function = node.func
            name = (
                function.id
                if isinstance(function, ast.Name)
                else function.attr
                if isinstance(function, ast.Attribute)
                else None
            )
            owner = (
                function.value.id
                if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name)
                else None
            )
            if (
                # a method of the same name (nn.Module.eval) is not the builtin
                (name in _DANGEROUS_CALLS and (isinstance(function, ast.Name) or owner == "builtins"))
                or (owner, name) in _DANGEROUS_ATTRIBUTES
                or name in ("exec_module", "import_module")
            ):
                if name == "compile" and owner == "re":
                    continue
                if (relative, name) in _ALLOWED:
                    continue
                found.append(f"{relative}:{node.lineno}: {owner + '.' if owner else ''}{name}(...)")
            if name in ("run", "Popen", "call", "check_output", "check_call") and owner == "subprocess":
                for keyword in node.keywords:
                    if keyword.arg == "shell" and not (
                        isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                    ):
                        found.append(f"{relative}:{node.lineno}: subprocess with shell=")
    assert found == [], "code that could execute data:\n" + "\n".join(found)


def test_the_grep_test_catches_what_it_should(tmp_path: Path) -> None:
    """The AST scan above must flag these (a guard against a scan that checks nothing)."""
    sample = "import pickle\nimport yaml\nx = eval(s)\nyaml.load(f)\nsubprocess.run(c, shell=True)\ntorch.load(p)\n"
    tree = ast.parse(sample)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    names = {
        (
            getattr(c.func, "value", None) and getattr(c.func.value, "id", None),
            getattr(c.func, "attr", getattr(c.func, "id", None)),
        )
        for c in calls
    }
    assert (None, "eval") in names and ("yaml", "load") in names and ("torch", "load") in names


PAYLOADS = [
    "__import__('os').system('touch {pwned}')",
    "${{jndi:ldap://x}}",
    "{{{{7*7}}}}",
    "`touch {pwned}`",
    "$(touch {pwned})",
    "!!python/object/apply:os.system ['touch {pwned}']",
]


def _payload_toml(pwned: Path, kind: str) -> str:
    text = [f"# {PAYLOADS[0].format(pwned=pwned)}"]
    quoted = [json.dumps(payload.format(pwned=pwned)) for payload in PAYLOADS]
    if kind == "suite":
        text += [
            "[suite]",
            f"name = {quoted[0]}",
            f"description = {quoted[1]}",
            "samples = 2",
            "target_sample_s = 0.001",
            "[[probe]]",
            'kind = "matmul"',
            f"label = {quoted[2]}",
            'dtypes = ["fp32"]',
            "shapes = [[8, 8, 8]]",
            f"libraries = [{quoted[3]}]",
        ]
    elif kind == "theme":
        text += [
            "[theme]",
            'name = "evil"',
            f"primary = {quoted[0]}",
            "[theme.variables]",
            f"footer-key-foreground = {quoted[4]}",
        ]
    else:
        text += [f"theme = {quoted[0]}", f"hidden_panels = [{quoted[5]}]"]
    return "\n".join(text) + "\n"


@pytest.mark.parametrize("kind", ["suite", "theme", "config"])
def test_python_looking_payloads_in_toml_are_data(tmp_path: Path, kind: str) -> None:
    from gpuscope.errors import BadInputError

    pwned = tmp_path / "PWNED"
    path = tmp_path / f"{kind}.toml"
    path.write_text(_payload_toml(pwned, kind))
    if kind == "suite":
        from gpuscope.probing.suite import load_suite

        try:
            suite = load_suite(str(path))
        except BadInputError as exc:
            assert "\n" not in str(exc)
        else:
            assert suite.name == PAYLOADS[0].format(pwned=pwned)  # kept as text
    elif kind == "theme":
        from gpuscope.tui.themes import ThemeError, load_theme_file

        with pytest.raises(ThemeError):  # not a colour: refused, as text
            load_theme_file(path)
    else:
        from gpuscope.tui.config import load_settings

        settings, problem = load_settings(path)
        assert settings.theme is None and problem is not None
    assert not pwned.exists()


def test_payloads_in_results_and_logs_are_data(tmp_path: Path) -> None:
    from support.roofline import h200_results
    from support.samples import make_sample

    from gpuscope.roofline.loading import load_model
    from gpuscope.telemetry.logfile import open_log_writer, read_log

    pwned = tmp_path / "PWNED"
    document = h200_results(hostname=PAYLOADS[0].format(pwned=pwned))
    document["workloads"][0]["name"] = PAYLOADS[3].format(pwned=pwned)
    document["system"]["cpu_model"] = PAYLOADS[4].format(pwned=pwned)
    results = tmp_path / "results.json"
    results.write_text(json.dumps(document))
    model = load_model([results], datasheet=False)
    assert model.points[0].name == PAYLOADS[3].format(pwned=pwned)
    sample = make_sample(0)
    sample.host.hostname = PAYLOADS[0].format(pwned=pwned)
    log = tmp_path / "log.jsonl"
    with open_log_writer(log) as writer:
        writer.write(sample)
    assert next(read_log(log)).host.hostname == sample.host.hostname
    assert not pwned.exists()


# --- the exporter binds loopback by default ---------------------------------------------------------


def test_exporter_defaults_to_loopback() -> None:
    import argparse

    from gpuscope.commands import parsers
    from gpuscope.exporter import DEFAULT_LISTEN, parse_listen, start_exporter

    assert parse_listen(DEFAULT_LISTEN)[0] == "127.0.0.1" and parsers.DEFAULT_LISTEN == DEFAULT_LISTEN
    parser = argparse.ArgumentParser()
    parsers.configure_serve(parser)
    assert parse_listen(parser.parse_args([]).listen)[0] == "127.0.0.1"
    for shorthand in (":0", "0", "9842"):  # a bare port never means "all interfaces"
        assert parse_listen(shorthand)[0] == "127.0.0.1"
    parser = argparse.ArgumentParser()
    parsers.configure_log(parser)
    assert parser.parse_args([]).prometheus is None  # log serves nothing unless asked
    with start_exporter(":0", process_metrics=False) as handle:
        assert handle._server.socket.getsockname()[0] == "127.0.0.1"  # type: ignore[union-attr]
        assert handle.url.startswith("http://127.0.0.1:")


def test_serve_process_listens_on_loopback_only(tmp_path: Path) -> None:
    import psutil

    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("GPUSCOPE_FAKE_NVML", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "serve", "--listen", ":0", "--no-gpu", "--duration", "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        listening: list[Any] = []
        deadline = time.monotonic() + 30
        while not listening and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
            proc = psutil.Process(process.pid)
            connections = (
                getattr(proc, "net_connections", None) or proc.connections
            )  # psutil < 6 has only connections()
            listening = [c for c in connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert listening, "serve never listened"
        assert {connection.laddr.ip for connection in listening} == {"127.0.0.1"}
    finally:
        process.terminate()
        process.wait(timeout=20)


# --- nothing written outside what the user named ------------------------------------------------------


def _tree(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*")}


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, Any]:
    """HOME, TMPDIR and the working folder inside tmp_path; XDG variables unset (defaults apply)."""
    from support.roofline import h200_results
    from support.samples import make_sample

    from gpuscope.telemetry.logfile import open_log_writer

    home, temp, work, inputs = (tmp_path / name for name in ("home", "tmp", "work", "inputs"))
    for folder in (home, temp, work, inputs):
        folder.mkdir()
    (inputs / "good.json").write_text(json.dumps(h200_results()))
    with open_log_writer(inputs / "good.jsonl") as writer:
        for tick in range(5):
            writer.write(make_sample(tick, gpus=1, cores=2))
    (inputs / "bench.py").write_text("def f():\n    return sum(range(100))\n")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(temp),
        "PYTHONPATH": str(REPO),
        "TZ": "UTC",
        "LANG": "C.UTF-8",
    }
    return {"root": tmp_path, "home": home, "tmp": temp, "work": work, "inputs": inputs, "env": env}


STRAY_CASES = {
    "log": (["log", "--no-gpu", "--interval", "0.1", "--duration", "0.5", "-o", "out.jsonl"], {"work/out.jsonl"}),
    "log-csv-stdout": (["log", "--no-gpu", "--interval", "0.1", "--duration", "0.3", "--format", "csv"], set()),
    "roofline": (["roofline", "--probes", "{inputs}/good.json", "--no-color"], set()),
    "roofline-json": (["roofline", "--probes", "{inputs}/good.json", "--json"], set()),
    "doctor": (["doctor", "--json", "--no-torch"], set()),
    "compare": (
        ["compare", "{inputs}/good.json", "{inputs}/good.json", "--format", "json", "-o", "cmp.json"],
        {"work/cmp.json"},
    ),
    "measure": (
        ["measure", "{inputs}/bench.py:f", "--flops", "1", "--bytes", "1", "--max-time", "0.1", "-o", "m.json"],
        {"work/m.json"},
    ),
    "report-md": (
        ["report", "--probes", "{inputs}/good.json", "--log", "{inputs}/good.jsonl", "-o", "r.md"],
        {"work/r.md"},
    ),
    "report-html": (
        ["report", "--probes", "{inputs}/good.json", "--log", "{inputs}/good.jsonl", "-o", "r.html"],
        {"work/r.html"},
    ),
}


@pytest.mark.parametrize("name", list(STRAY_CASES))
def test_commands_write_only_what_was_named(sandbox: dict[str, Any], name: str) -> None:
    argv, expected = STRAY_CASES[name]
    argv = [arg.replace("{inputs}", str(sandbox["inputs"])) for arg in argv]
    root: Path = sandbox["root"]
    inputs_before = {path: path.stat().st_mtime_ns for path in sandbox["inputs"].iterdir()}
    before = _tree(root)
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=sandbox["env"],
        cwd=sandbox["work"],
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode in (0, 1), done.stderr  # compare of a file with itself may find nothing to flag
    created = _tree(root) - before
    allowed = {entry for entry in created if entry.startswith(("home/.config/gpuscope", "home/.local/share/gpuscope"))}
    allowed |= created & {"home/.config", "home/.local", "home/.local/share"}  # parents of the standard folders
    assert created - allowed == expected, f"unexpected files: {sorted(created - allowed - expected)}"
    assert {path: path.stat().st_mtime_ns for path in sandbox["inputs"].iterdir()} == inputs_before  # inputs untouched


# --- reports escape everything ---------------------------------------------------------------------

EVIL = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "</style><svg onload=alert(3)>",
    "javascript:alert(4)",
    "]]></text><script>alert(5)</script>",
    "<!-- --><iframe src=//evil>",
    "| col | [link](javascript:alert(6)) ![img](http://evil/x.png) <b>bold</b>",
    "\u202e\u0000\x1b[31mred",
]
#: Keys whose values are structure, not text (changing them makes the file invalid or changes meaning).
_STRUCTURAL = {
    "schema",
    "kind",
    "unit",
    "device",
    "type",
    "statistic",
    "status",
    "dtype",
    "role",
    "library",
    "direction",
    "kernel",
    "host_memory",
    "cache_state",
    "schema_version",
    "measurement_id",
    "id",
    "op",
    "level",
    "backend",
    "counting_rule",
    "bytes_rule",
    "transpose",
    "memory_kind",
    "engine",
    "op_name",
}


def _poison(node: Any, counter: list[int], key: str | None = None) -> Any:
    if isinstance(node, dict):
        return {k: _poison(v, counter, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_poison(item, counter, key) for item in node]
    if isinstance(node, str) and key not in _STRUCTURAL:
        counter[0] += 1
        return EVIL[counter[0] % len(EVIL)] + node
    return node


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for attr, value in attrs:
            if attr.startswith("on"):
                self.handlers.append(f"{tag}.{attr}")
            if (
                attr in ("href", "src", "xlink:href", "action")
                and value
                and value.strip().lower().startswith(("javascript:", "http:", "https:", "//"))
            ):
                self.urls.append(f"{tag}.{attr}={value}")


def test_every_string_of_a_hostile_results_file_and_log_stays_text(tmp_path: Path) -> None:
    from support.reports import make_log_samples, make_results

    from gpuscope.report import write_report
    from gpuscope.telemetry.logfile import open_log_writer

    counter = [0]
    document = _poison(make_results(), counter)
    assert counter[0] > 20
    results = tmp_path / "results.json"
    results.write_text(json.dumps(document))
    log = tmp_path / "telemetry.jsonl"
    samples = make_log_samples(count=10, hostname=EVIL[0])
    for sample in samples:
        sample.host.cpu_model = EVIL[2]
        for gpu in sample.gpus:
            gpu.name = EVIL[4]
            if isinstance(gpu.processes, list):
                for process in gpu.processes:
                    process.name = EVIL[1]
                    process.user = EVIL[5]
    with open_log_writer(log) as writer:
        for sample in samples:
            writer.write(sample)
    html_path = tmp_path / "report.html"
    write_report(html_path, [results], log_path=log)
    html = html_path.read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(html)
    assert not {"script", "iframe", "img", "object", "embed", "base", "form", "link", "meta"} - {"meta"} & set(
        parser.tags
    )
    assert parser.handlers == [], parser.handlers
    assert parser.urls == [], parser.urls
    assert "\x1b" not in html and "\x00" not in html
    markdown_path = tmp_path / "report.md"
    write_report(markdown_path, [results], log_path=log)
    markdown = markdown_path.read_text(encoding="utf-8")
    for raw in ("<script", "<img", "<iframe", "<svg", "](javascript:", "<b>"):
        assert raw not in markdown, raw
    json_path = tmp_path / "report.json"
    write_report(json_path, [results], log_path=log)
    json.loads(json_path.read_text(encoding="utf-8"))  # still valid JSON, strings kept as data


def test_terminal_output_strips_escape_sequences(tmp_path: Path) -> None:
    """A results file cannot drive the terminal: no raw ESC from data reaches ``gpuscope roofline``."""
    from support.roofline import h200_results

    document = h200_results(hostname="\x1b]0;pwned\x07host")
    document["workloads"][0]["name"] = "\x1b[2J\x1b[31mwipe"
    document["devices"][0]["name"] = "NVIDIA H200\x1b[5m"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope", "roofline", "--probes", str(path), "--no-color", "--width", "100"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert re.search(r"wipe", done.stdout)
