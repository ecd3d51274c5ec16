"""Build a fleet source from ``gpuscope fleet``'s options (shared by the command and the screen)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Protocol

from gpuscope.errors import UsageError
from gpuscope.fleet.hosts import HostsSource, parse_hosts, read_hosts_file
from gpuscope.fleet.http import HttpOptions, read_basic_auth, read_bearer_token
from gpuscope.fleet.prometheus import PrometheusSource
from gpuscope.fleet.snapshot import FleetSnapshot, HistoryPoint

__all__ = ["FleetSource", "source_from_args", "http_options_from_args"]


class FleetSource(Protocol):
    """What the command and the screen need of a source."""

    kind: str
    where: str

    def refresh(self) -> FleetSnapshot:
        """One snapshot. Raises :class:`gpuscope.fleet.http.FetchError` when the whole source fails."""

    def refresh_history(self) -> int:
        """Fetch history where the source keeps it elsewhere; returns the queries made."""

    def node_history(self, instance: str, name: str) -> list[HistoryPoint]:
        """One node's history series."""

    def close(self) -> None:
        """Release connections and threads."""


def http_options_from_args(args: argparse.Namespace) -> HttpOptions:
    """TLS files, credentials (read from their files now) and the timeout."""
    if args.basic_auth_file and args.bearer_token_file:
        raise UsageError("give --basic-auth-file or --bearer-token-file, not both")
    if args.key_file and not args.cert_file:
        raise UsageError("--key-file needs --cert-file")
    authorization = None
    if args.basic_auth_file:
        authorization = read_basic_auth(Path(args.basic_auth_file))
    elif args.bearer_token_file:
        authorization = read_bearer_token(Path(args.bearer_token_file))
    if not 0.1 <= args.timeout <= 120:
        raise UsageError(f"--timeout {args.timeout:g} must be between 0.1 and 120 seconds")

    def path(value: str | None) -> Path | None:
        return Path(value) if value else None

    return HttpOptions(
        timeout_s=float(args.timeout), ca_file=path(args.ca_file), cert_file=path(args.cert_file),
        key_file=path(args.key_file), authorization=authorization,
    )  # fmt: skip


def source_from_args(args: argparse.Namespace) -> FleetSource:
    """The source the options name (``--prometheus``, ``--hosts`` or ``--hosts-file``)."""
    if not 0.0 < args.straggler_margin < 1.0:
        raise UsageError(f"--straggler-margin {args.straggler_margin:g} must be between 0 and 1 (e.g. 0.10)")
    options = http_options_from_args(args)
    if not 1.0 <= args.history_minutes <= 1440.0:
        raise UsageError(f"--history-minutes {args.history_minutes:g} must be between 1 and 1440")
    if args.prometheus:
        return PrometheusSource(
            args.prometheus, options, job=args.job, margin=args.straggler_margin, history_s=args.history_minutes * 60.0
        )
    if args.hosts_file:
        urls = read_hosts_file(Path(args.hosts_file))
    else:
        urls = parse_hosts(args.hosts)
    if not 1 <= args.concurrency <= 256:
        raise UsageError(f"--concurrency {args.concurrency} must be between 1 and 256")
    return HostsSource(urls, options, concurrency=args.concurrency, margin=args.straggler_margin)
