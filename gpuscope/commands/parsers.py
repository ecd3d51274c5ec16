"""Every command's options, declared without importing the command: ``gpuscope --help`` and
``gpuscope <command> --help`` load this module and :mod:`gpuscope.commands.options` only. The
command that runs is imported by :func:`gpuscope.cli.main` (``gpuscope.commands.<name>.run``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from gpuscope.commands.options import (
    add_function_target,
    add_host_only,
    add_interval,
    add_repeatable,
    add_results_inputs,
    add_sampling,
    add_value,
    path_option,
)

__all__ = ["CONFIGURE", "MIN_WIDTH", "MAX_WIDTH", "MIN_HEIGHT", "MAX_HEIGHT", "DEFAULT_LISTEN"]

#: ``roofline`` chart bounds, columns and rows (gpuscope.commands.roofline.chart_size).
MIN_WIDTH = 60
#: Larger charts are never drawn: plotext's time and memory grow with the canvas.
MAX_WIDTH = 1000
MIN_HEIGHT = 12
MAX_HEIGHT = 500
#: ``serve --listen``'s default; the same as gpuscope.exporter.DEFAULT_LISTEN (not imported: --help stays light).
DEFAULT_LISTEN = "127.0.0.1:9842"


def _speed(text: str) -> float:
    """``replay --speed``: a factor from 1/16 to 64."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed {text!r} is not a number") from None
    if not math.isfinite(value) or not 1 / 16 <= value <= 64:
        raise argparse.ArgumentTypeError(f"speed {text} must be between 0.0625 and 64")
    return value


def configure_tui(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--theme",
        metavar="NAME",
        help="colour theme (shipped: gpuscope-dark, gpuscope-light, gpuscope-high-contrast; "
        "user themes in $XDG_CONFIG_HOME/gpuscope/themes); remembered for later runs",
    )
    add_interval(parser)
    add_repeatable(
        parser,
        "--probes",
        "RESULTS_JSON",
        "a probe results file whose ceilings and points to show on the roofline (repeatable)",
    )
    add_repeatable(
        parser,
        "--suite",
        "SUITE_TOML",
        "an extra probe suite file to offer on the probes screen (repeatable; shipped suites are always there)",
    )
    parser.add_argument(
        "--demo",
        nargs="?",
        const="nvidia",
        default=None,
        choices=("nvidia", "amd", "both"),
        help="simulated GPUs to try the UI on a machine without them: nvidia (default: an H200 and an A100), "
        "amd (two MI300X through a fake AMD SMI) or both",
    )


def configure_log(parser: argparse.ArgumentParser) -> None:
    add_sampling(parser)
    parser.add_argument(
        "--output", "-o", default=None, metavar="PATH", type=path_option,
        help="file to write (default or -: standard output; a FIFO or pipe is written as a stream); "
        "an existing file needs --append or --force",
    )  # fmt: skip
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument(
        "--append",
        action="store_true",
        help="continue an existing gpuscope log (a killed run's cut last line is dropped); other files are refused",
    )
    existing.add_argument("--force", action="store_true", help="replace an existing --output file")
    parser.add_argument(
        "--format", choices=("jsonl", "csv"), default=None,
        help="jsonl or csv (default: from the --output name, else jsonl); a name ending .zst or .gz is compressed",
    )  # fmt: skip
    parser.add_argument(
        "--rotate-size", default=None, metavar="SIZE",
        help="start a new file when the current one reaches SIZE (e.g. 500MB, 1GB); files are BASE.<UTC time>.EXT",
    )  # fmt: skip
    parser.add_argument(
        "--rotate-every", default=None, metavar="AGE",
        help="start a new file every AGE on the clock (e.g. 1h, 30m, 1d)",
    )  # fmt: skip
    parser.add_argument(
        "--keep", type=int, default=None, metavar="N", help="with rotation: keep the newest N files, remove older ones"
    )
    parser.add_argument(
        "--no-gpm", action="store_true", help="do not read GPM metrics (DRAM bandwidth, SM/tensor activity)"
    )
    parser.add_argument(
        "--prometheus",
        default=None,
        metavar="HOST:PORT",
        help="also serve each sample to Prometheus at HOST:PORT/metrics (see docs/prometheus.md)",
    )
    _add_exporter_protection(parser)


def _add_exporter_protection(parser: argparse.ArgumentParser) -> None:
    """The exporter's ``--web-config``, ``--insecure`` and ``--process-labels`` (serve, log --prometheus)."""
    parser.add_argument(
        "--web-config",
        default=None,
        metavar="FILE",
        type=path_option,
        help="TLS, client certificates and basic auth for the exporter (Prometheus exporter-toolkit format; "
        "reloaded when it changes; see docs/prometheus.md)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="serve off loopback with neither TLS nor basic auth (anyone who reaches the port reads the metrics)",
    )
    parser.add_argument(
        "--process-labels",
        choices=("full", "pid", "none"),
        default=None,
        help="what per-process GPU series carry: full (pid, process name, user), pid, or none (counts and totals "
        "only); default full on loopback, pid elsewhere",
    )


def configure_snapshot(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (the telemetry record and its alerts)"
    )
    add_value(
        parser, "--wait", 0.5, "SECONDS", "seconds between the two reads that rates need (default 0.5, 0.1 to 10)"
    )
    add_host_only(parser)
    _add_sysfs(parser)


def configure_doctor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument(
        "--no-torch", action="store_true", help="skip the torch/CUDA check (importing torch takes seconds)"
    )
    _add_sysfs(parser)


def _add_sysfs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sysfs",
        metavar="PATH",
        default="/sys",
        type=path_option,
        help="sysfs root for NUMA nodes and NICs (default /sys; e.g. a host's /sys mounted in a container)",
    )


def configure_topo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the topology record as one JSON object")
    _add_sysfs(parser)


def configure_probe(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument(
        "--suite",
        default="quick",
        help="a shipped suite (quick, full, transformer) or a suite TOML path (default quick)",
    )
    parser.add_argument(
        "--output",
        "-o",
        default="results.json",
        metavar="PATH",
        type=path_option,
        help="results JSON to write (default results.json)",
    )
    add_value(
        parser,
        "--memory-fraction",
        0.5,
        "F",
        "never allocate more than this fraction of free device memory (default 0.5)",
    )
    parser.add_argument("--no-telemetry", action="store_true", help="do not record telemetry around measurements")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="run under torchrun: every rank probes its device, rank 0 writes one file (docs/cluster.md)",
    )
    add_value(
        parser,
        "--straggler-margin",
        0.10,
        "F",
        "with --distributed: flag ranks more than F below the median ceiling (default 0.10)",
    )
    add_value(
        parser,
        "--rank-timeout",
        900.0,
        "S",
        "with --distributed: how long rank 0 waits for the other ranks (default 900)",
    )
    parser.add_argument(
        "--report",
        metavar="PATH",
        type=path_option,
        help="also write a snapshot report of the results (.html, .md or .json; see `gpuscope report`)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --output file (by default a probe refuses to overwrite another run)",
    )


def configure_roofline(parser: argparse.ArgumentParser) -> None:
    add_results_inputs(
        parser,
        "results file from `gpuscope probe` or `gpuscope measure`; repeat to combine several on one chart",
        required=True,
    )
    parser.add_argument(
        "--json", action="store_true", help="print the model (roofs, ridge points, placed points) as JSON"
    )
    parser.add_argument(
        "--width", type=int, metavar="N", help=f"chart width in columns (default: the terminal's; at least {MIN_WIDTH})"
    )
    parser.add_argument(
        "--height", type=int, metavar="N", help="chart height in rows (default: fits the terminal, 16-40)"
    )
    parser.add_argument("--no-datasheet", action="store_true", help="leave out the built-in datasheet roofs")
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="draw the working-set sweeps instead (bandwidth against working set, from `probe --suite sweep` "
        "or `full`) with the cache levels their plateaus show",
    )
    parser.add_argument(
        "--all-roofs",
        action="store_true",
        help="also draw every other dtype, cache level and datasheet roof (default: per device the envelope "
        "of the dtypes its workloads use, plus DRAM; the tables list every roof)",
    )
    color = parser.add_mutually_exclusive_group()
    color.add_argument(
        "--color", dest="color", action="store_const", const=True, help="colour even when not a terminal"
    )
    no_color = "no colour (also NO_COLOR=1 or not a terminal)"
    color.add_argument("--no-color", dest="color", action="store_const", const=False, help=no_color)


def configure_measure(parser: argparse.ArgumentParser) -> None:
    add_function_target(parser, "function to time")
    parser.add_argument("--name", help="label of the point (default: MODULE:FUNCTION)")
    parser.add_argument("--device", help="cpu, cuda or cuda:N (default: where the tensor arguments are, else cpu)")
    parser.add_argument(
        "--output",
        "-o",
        metavar="RESULTS.json",
        type=path_option,
        help="results file to append the workload to (created when absent)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="flush the last-level cache before each sample (default: warm, and labelled so)",
    )
    add_value(parser, "--samples", 15, "N", "timed samples (default 15)")
    add_value(parser, "--max-time", 10.0, "SECONDS", "time budget of the sampling phase (default 10)")
    add_value(parser, "--warmup-max", 2.0, "SECONDS", "longest warm-up before sampling (default 2)")
    add_value(parser, "--target-sample", 0.02, "SECONDS", "minimum duration of one sample (default 0.02)")
    parser.add_argument("--flops", type=float, help="FLOPs of one call, instead of counting them")
    parser.add_argument(
        "--bytes", type=float, dest="bytes_moved", help="bytes of one call, instead of the lower bound from the tensors"
    )
    parser.add_argument("--no-telemetry", action="store_true", help="do not measure DRAM bytes with GPM telemetry")
    parser.add_argument("--json", action="store_true", help="print the workload entry as JSON")


def configure_profile(parser: argparse.ArgumentParser) -> None:
    add_function_target(
        parser,
        "one step to profile",
        'arguments as for `gpuscope measure`: a JSON list, or {"args": [...], "kwargs": {...}}; '
        '{"tensor": [shape], "dtype": "float32"} makes a random tensor',
    )
    parser.add_argument("--name", help="label of the profile (default: MODULE:FUNCTION)")
    parser.add_argument(
        "--device",
        help="cpu, cuda or cuda:N, where --args-json tensors are made "
        "(default: cpu when --args-json makes tensors, else cuda when available, else cpu)",
    )
    add_value(parser, "--steps", 3, "N", "profiled steps (default 3)")
    add_value(parser, "--warmup", 1, "N", "warm-up steps before the counting step (default 1)")
    roofs_help = "probe results whose measured ceilings judge the ops (repeatable; default: datasheet roofs)"
    parser.add_argument(
        "--roofs", action="append", default=[], metavar="RESULTS.json", type=path_option, help=roofs_help
    )
    output_help = "results file to append the profile to (created when absent); its own ceilings are used as roofs too"
    parser.add_argument("--output", "-o", metavar="RESULTS.json", type=path_option, help=output_help)
    add_value(parser, "--top", 10, "N", "groups in the table (default 10)")
    add_value(parser, "--width", 80, "COLUMNS", "width of the table and chart (default 80)")
    parser.add_argument("--no-chart", action="store_true", help="do not draw the roofline")
    add_value(parser, "--modules", 1, "DEPTH", "module totals down to this depth (default 1; 0 hides them)")
    parser.add_argument("--no-energy", action="store_true", help="do not read the energy counters")
    parser.add_argument("--no-telemetry", action="store_true", help="do not measure DRAM bytes with GPM telemetry")
    parser.add_argument("--json", action="store_true", help="print the workload entry (with the groups) as JSON")
    parser.add_argument(
        "--compare-eager",
        action="store_true",
        help="also profile the step with torch.compile turned off (force_eager) and print the difference per region",
    )
    parser.add_argument(
        "--generate",
        type=int,
        metavar="N",
        help="profile a transformers generate() of N new tokens: the target returns (model, inputs[, generate "
        "kwargs]); prefill and decode steps are split, each on the roofline (docs/profile.md, Generation)",
    )


def configure_report(parser: argparse.ArgumentParser) -> None:
    add_results_inputs(
        parser, "results file from `gpuscope probe` or `gpuscope measure` (a report.json works too); repeat for several"
    )
    parser.add_argument(
        "--from",
        dest="from_report",
        metavar="REPORT.json",
        type=path_option,
        help="re-render a report.json written earlier (same data, same HTML byte for byte)",
    )
    parser.add_argument(
        "--log",
        metavar="TELEMETRY.jsonl",
        type=path_option,
        help="telemetry log from `gpuscope log` recorded alongside the probes (.zst/.gz too; "
        "a folder, glob or rotated set reads as one log)",
    )
    parser.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        type=path_option,
        required=True,
        help="where to write: report.html, report.md or report.json",
    )
    parser.add_argument(
        "--format",
        dest="fmt",
        choices=("html", "md", "markdown", "json"),
        help="output format (default: from the extension of --output)",
    )
    parser.add_argument(
        "--redact", action="store_true", help="drop hostnames, usernames and command lines everywhere in the report"
    )
    parser.add_argument(
        "--fleet", metavar="FLEET.json", type=path_option,
        help="report a fleet snapshot written by `gpuscope fleet --once --json` (instead of results files)",
    )  # fmt: skip
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --output even when it holds results, a telemetry log, a suite or a theme",
    )


def configure_compare(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results",
        metavar="RESULTS.json",
        type=path_option,
        nargs="+",
        help="results files (a report.json works too); one multi-node file compares its hosts and ranks",
    )
    parser.add_argument(
        "--format",
        dest="fmt",
        choices=("text", "md", "markdown", "json"),
        default="text",
        help="output format (default: text)",
    )
    parser.add_argument(
        "--output", "-o", metavar="PATH", type=path_option, help="write to PATH (atomically) instead of standard output"
    )


def configure_replay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", metavar="FILE", type=path_option,
        help="a telemetry log written by `gpuscope log` (JSON lines or CSV, plain, .zst or .gz), "
        "or a folder, glob or rotated base name read as one log",
    )  # fmt: skip
    parser.add_argument(
        "--speed", type=_speed, default=1.0, metavar="X", help="playback speed, 1 = as recorded (0.0625 to 64)"
    )
    parser.add_argument("--theme", metavar="NAME", help="colour theme (see `gpuscope tui --help`)")
    add_repeatable(parser, "--probes", "RESULTS_JSON", "results file to show on the roofline (repeatable)")


def configure_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"address to serve /metrics on (default {DEFAULT_LISTEN}; use 0.0.0.0:PORT to expose it to the network)",
    )
    add_sampling(parser, "leave out per-process GPU series (pid labels churn)")
    _add_exporter_protection(parser)


def configure_fleet(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--prometheus", metavar="URL", help="a Prometheus server that scrapes gpuscope exporters")
    where.add_argument(
        "--hosts", metavar="HOST:PORT,...", help="gpuscope exporters to scrape directly (port 9842 by default)"
    )
    where.add_argument(
        "--hosts-file", metavar="FILE", type=path_option, help="exporters, HOST:PORT per line (# comments)"
    )
    parser.add_argument("--once", action="store_true", help="print one line per node and exit")
    parser.add_argument("--json", action="store_true", help="with --once: print the fleet snapshot as JSON")
    add_value(parser, "--interval", 2.0, "SECONDS", "seconds between refreshes of the screen (default 2, minimum 0.5)")
    add_value(parser, "--timeout", 3.0, "SECONDS", "timeout of each request (default 3)")
    add_value(parser, "--concurrency", 16, "N", "--hosts: hosts scraped at once (default 16)")
    parser.add_argument(
        "--job", metavar="REGEX", help="--prometheus: only targets of these jobs (default: every gpuscope target)"
    )
    add_value(parser, "--history-minutes", 15.0, "MINUTES", "--prometheus: history shown for a node (default 15)")
    parser.add_argument(
        "--ca-file", metavar="PEM", type=path_option, help="CA certificates for https servers (default: the system's)"
    )
    parser.add_argument("--cert-file", metavar="PEM", type=path_option, help="client certificate for mutual TLS")
    parser.add_argument("--key-file", metavar="PEM", type=path_option, help="key of --cert-file")
    parser.add_argument(
        "--basic-auth-file", metavar="FILE", type=path_option, help="a file holding one USER:PASSWORD line"
    )
    parser.add_argument("--bearer-token-file", metavar="FILE", type=path_option, help="a file holding a bearer token")
    add_value(parser, "--straggler-margin", 0.10, "F", "straggler: more than F below its peers' median (default 0.1)")
    parser.add_argument("--theme", metavar="NAME", help="colour theme (see `gpuscope tui --help`)")


#: name -> the function that adds its options.
CONFIGURE: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "tui": configure_tui,
    "log": configure_log,
    "snapshot": configure_snapshot,
    "doctor": configure_doctor,
    "topo": configure_topo,
    "probe": configure_probe,
    "roofline": configure_roofline,
    "measure": configure_measure,
    "profile": configure_profile,
    "report": configure_report,
    "compare": configure_compare,
    "replay": configure_replay,
    "serve": configure_serve,
    "fleet": configure_fleet,
}
