"""The fleet's HTTP client: one kept-alive connection per server, TLS verified by default,
credentials read from files (never from the command line), and one-line errors.

:class:`FetchError` carries a message that names the URL and says what to do.
"""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gpuscope.errors import BadInputError, UsageError
from gpuscope.textsafe import safe_text

__all__ = ["FetchError", "HttpOptions", "Connection", "read_basic_auth", "read_bearer_token", "split_url"]

#: Largest answer read (an exporter with many process series is well under this).
MAX_BODY_BYTES = 64 * 2**20


class FetchError(Exception):
    """A request failed; ``str()`` is one line. ``kind``: unreachable, timeout, tls, http, auth."""

    def __init__(self, message: str, kind: str = "unreachable", status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


@dataclass(frozen=True)
class HttpOptions:
    """How to talk to every server: timeouts in seconds, TLS files, one credential at most."""

    timeout_s: float = 3.0
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    authorization: str | None = None  # the whole Authorization header value

    def ssl_context(self) -> ssl.SSLContext:
        """A verifying client context (the system's CAs, or ``ca_file``; a client certificate
        when ``cert_file`` is given). Raises :class:`BadInputError` for unreadable files."""
        try:
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
            if self.cert_file is not None:
                context.load_cert_chain(str(self.cert_file), str(self.key_file) if self.key_file else None)
        except (OSError, ssl.SSLError) as exc:
            files = ", ".join(str(p) for p in (self.ca_file, self.cert_file, self.key_file) if p)
            raise BadInputError(f"{safe_text(files)}: cannot load the TLS files: {safe_text(exc)}") from None
        return context


def _one_line_file(path: Path, what: str) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{safe_text(path)}: cannot read the {what}: {safe_text(exc)}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise BadInputError(f"{safe_text(path)}: the {what} file must hold exactly one non-empty line")
    return lines[0]


def read_basic_auth(path: Path) -> str:
    """The Authorization header for the ``USER:PASSWORD`` line in ``path`` (one line)."""
    line = _one_line_file(path, "basic auth (USER:PASSWORD)")
    user, sep, password = line.partition(":")
    if not sep or not user:
        raise BadInputError(f"{safe_text(path)}: line 1 is not USER:PASSWORD")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def read_bearer_token(path: Path) -> str:
    """The Authorization header for the token in ``path`` (one line)."""
    return "Bearer " + _one_line_file(path, "bearer token")


def split_url(url: str, default_port: int | None = None) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of ``url``; a bare ``HOST:PORT`` means http.
    Raises :class:`UsageError` naming the URL."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{safe_text(url)}: not an http:// or https:// URL")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"{safe_text(url)}: the port is not a number from 1 to 65535") from None
    if port is None:
        port = default_port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


class Connection:
    """One server, one kept-alive connection (reopened after any failure); thread-safe."""

    def __init__(self, url: str, options: HttpOptions, context: ssl.SSLContext | None = None) -> None:
        self.scheme, self.host, self.port, self.prefix = split_url(url)
        self.options = options
        self._context = context if context is not None else (options.ssl_context() if self.scheme == "https" else None)
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self.base = f"{self.scheme}://{self.host}:{self.port}{self.prefix}"

    def _open(self) -> http.client.HTTPConnection:
        timeout = self.options.timeout_s
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self._context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def close(self) -> None:
        """Close the connection (the next request opens another)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def get(self, path: str) -> tuple[int, str, bytes]:
        """GET ``prefix + path``: (status, content type, body). Raises :class:`FetchError`."""
        with self._lock:
            for attempt in (0, 1):
                reused = self._connection is not None
                if self._connection is None:
                    self._connection = self._open()
                try:
                    return self._request(self._connection, self.prefix + path)
                except FetchError:
                    self._connection.close()
                    self._connection = None
                    raise
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                    self._connection.close()
                    self._connection = None
                    if reused and attempt == 0:
                        continue  # a kept-alive connection the server closed: once more, fresh
                    raise self._error(exc) from None
                except (OSError, http.client.HTTPException) as exc:
                    self._connection.close()
                    self._connection = None
                    raise self._error(exc) from None
        raise FetchError(f"{self.base}: no answer")  # pragma: no cover - the loop returns or raises

    def _request(self, connection: http.client.HTTPConnection, path: str) -> tuple[int, str, bytes]:
        headers = {"Accept": "application/json, text/plain;q=0.9", "User-Agent": "gpuscope-fleet"}
        if self.options.authorization:
            headers["Authorization"] = self.options.authorization
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            raise FetchError(f"{self.base}: the answer is larger than {MAX_BODY_BYTES // 2**20} MiB", "http")
        if response.status in (401, 403):
            hint = "" if self.options.authorization else " (give --basic-auth-file or --bearer-token-file)"
            raise FetchError(f"{self.base}: refused with HTTP {response.status}{hint}", "auth", response.status)
        if response.will_close:
            connection.close()
            self._connection = None
        return response.status, response.getheader("Content-Type", "") or "", body

    def _error(self, exc: BaseException) -> FetchError:
        where = self.base
        if isinstance(exc, ssl.SSLCertVerificationError):
            return FetchError(
                f"{where}: TLS certificate not trusted ({safe_text(exc.verify_message)}); give --ca-file", "tls"
            )
        if isinstance(exc, ssl.SSLError):
            return FetchError(f"{where}: TLS failed ({safe_text(exc.reason or exc)})", "tls")
        if isinstance(exc, (TimeoutError, socket.timeout)):
            return FetchError(f"{where}: no answer within {self.options.timeout_s:g} s", "timeout")
        if isinstance(exc, ConnectionRefusedError):
            return FetchError(f"{where}: connection refused (nothing listens there)", "unreachable")
        if isinstance(exc, socket.gaierror):
            return FetchError(f"{where}: unknown host {safe_text(self.host)}", "unreachable")
        if isinstance(exc, http.client.HTTPException):
            return FetchError(f"{where}: not an HTTP answer ({type(exc).__name__})", "http")
        text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return FetchError(f"{where}: {safe_text(text)}", "unreachable")
