"""What stands between a request and the metrics: the web configuration (reloaded when its files
change), basic auth, the rate limit, the configured response headers, ``/-/healthy`` and
``/-/ready``, and the exporter's own counters.

bcrypt is slow on purpose (about 60 ms at cost 10). A (user, password) pair is checked once and
its verdict cached under an HMAC of the pair with a key made at start, so a scraper pays bcrypt on
its first request only; at most one bcrypt runs at a time, and a request that waits too long for it
gets ``503`` instead of holding a worker.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import bcrypt

from gpuscope.errors import BadInputError
from gpuscope.exporter.webconfig import WebConfig, files_signature, load_web_config
from gpuscope.textsafe import safe_text

__all__ = ["ExporterStats", "ConfigWatcher", "PasswordCheck", "Gate", "REFUSAL_REASONS", "RELOAD_CHECK_S"]

#: ``gpuscope_exporter_auth_refusals_total`` reasons.
REFUSAL_REASONS = ("no_credentials", "wrong_credentials", "tls_handshake", "client_san")
#: The web configuration's files are looked at for changes at most this often, seconds.
RELOAD_CHECK_S = 1.0
#: The longest a request waits for another request's bcrypt check before ``503``, seconds.
BCRYPT_WAIT_S = 2.0
#: Verdicts kept (the oldest goes first); a fleet has a few scrapers, an attacker many guesses.
CACHE_ENTRIES = 256
#: Compared against for an unknown user, so that the answer takes as long as for a known one
#: (a bcrypt hash, cost 10, of a password nobody uses).
_DECOY = b"$2b$10$l4Mq95WS16KsQfVOUwlPQ.wBplGydirrKpZ5dNjN/I12YIr88/gm6"

StartResponse = Callable[..., Any]
App = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class ExporterStats:
    """The exporter's own counters (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.scrape_errors = 0
        self.refusals: dict[str, int] = dict.fromkeys(REFUSAL_REASONS, 0)

    def scrape_error(self) -> None:
        """Count a scrape whose answer could not be made whole."""
        with self._lock:
            self.scrape_errors += 1

    def refused(self, reason: str) -> None:
        """Count a refused request or TLS connection (one of :data:`REFUSAL_REASONS`)."""
        with self._lock:
            self.refusals[reason] = self.refusals.get(reason, 0) + 1

    def snapshot(self) -> tuple[int, dict[str, int]]:
        """(scrape errors, refusals by reason) as of now."""
        with self._lock:
            return self.scrape_errors, dict(self.refusals)


def _say(line: str) -> None:
    try:
        print(f"gpuscope: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


class ConfigWatcher:
    """The current :class:`WebConfig`; reloads it when one of its files changes (looked at once a
    second at most). A reload that fails keeps the previous configuration and says so in one line,
    once per change of the files; so does one that would turn TLS on or off (that needs a restart)."""

    def __init__(self, config: WebConfig, say: Callable[[str], None] = _say) -> None:
        self._config = config
        self._say = say
        self._lock = threading.Lock()
        self._signature = files_signature(config.files)
        self._checked_s = time.monotonic()
        self.reloads = 0

    def current(self) -> WebConfig:
        """The configuration to use now (reloaded first if its files changed)."""
        now = time.monotonic()
        if now - self._checked_s < RELOAD_CHECK_S:
            return self._config
        with self._lock:
            if now - self._checked_s >= RELOAD_CHECK_S:
                self._checked_s = now
                self._maybe_reload()
            return self._config

    def _maybe_reload(self) -> None:
        signature = files_signature(self._config.files)
        if signature == self._signature:
            return
        self._signature = signature
        path = self._config.path
        try:
            fresh = load_web_config(path)
        except BadInputError as exc:
            self._say(f"warning: {safe_text(str(exc))}; reload failed, the previous web configuration stays")
            return
        if (fresh.tls is None) != (self._config.tls is None):
            self._say(f"warning: --web-config {path}: turning TLS on or off needs a restart; the previous stays")
            return
        self._signature = files_signature(fresh.files)
        self._config = fresh
        self.reloads += 1
        self._say(f"--web-config {path} reloaded ({fresh.describe()})")


class PasswordCheck:
    """Basic-auth verdicts: bcrypt once per (user, hash, password), then from a bounded cache."""

    def __init__(self) -> None:
        self._key = os.urandom(32)
        self._lock = threading.Lock()
        self._bcrypt = threading.Lock()
        self._cache: OrderedDict[bytes, bool] = OrderedDict()
        self.bcrypt_calls = 0

    def check(self, users: Mapping[str, bytes], header: str | None) -> str:
        """``ok``, ``no_credentials``, ``wrong_credentials`` or ``busy`` for an Authorization header."""
        credentials = _basic_credentials(header)
        if credentials is None:
            return "no_credentials"
        user, password = credentials
        hashed = users.get(user)
        known = hashed is not None
        against = hashed if hashed is not None else _DECOY
        pair = b"\0".join((user.encode("utf-8", "surrogateescape"), against, password))
        digest = hmac.new(self._key, pair, hashlib.sha256).digest()
        with self._lock:
            verdict = self._cache.get(digest)
            if verdict is not None:
                self._cache.move_to_end(digest)
        if verdict is None:
            if not self._bcrypt.acquire(timeout=BCRYPT_WAIT_S):
                return "busy"
            try:
                self.bcrypt_calls += 1
                verdict = bcrypt.checkpw(password, against) and known
            except ValueError:
                verdict = False
            finally:
                self._bcrypt.release()
            with self._lock:
                self._cache[digest] = verdict
                while len(self._cache) > CACHE_ENTRIES:
                    self._cache.popitem(last=False)
        return "ok" if verdict and known else "wrong_credentials"


def _basic_credentials(header: str | None) -> tuple[str, bytes] | None:
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        raw = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = raw.partition(b":")
    if not sep:
        return None
    return user.decode("utf-8", "surrogateescape"), password


class _Bucket:
    """A token bucket: ``burst`` requests at once, one more every ``interval_s``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shape = (0.0, 0)
        self._tokens = 0.0
        self._at_s = time.monotonic()

    def take(self, interval_s: float, burst: int) -> bool:
        with self._lock:
            now = time.monotonic()
            if self._shape != (interval_s, burst):  # new or reloaded limits: start full
                self._shape, self._tokens, self._at_s = (interval_s, burst), float(burst), now
            self._tokens = min(float(burst), self._tokens + (now - self._at_s) / interval_s)
            self._at_s = now
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True


class Gate:
    """The WSGI application the exporter serves: checks, then ``app`` (the metrics)."""

    def __init__(
        self, app: App, watcher: ConfigWatcher | None, stats: ExporterStats, ready: Callable[[], bool]
    ) -> None:
        self._app = app
        self._watcher = watcher
        self._stats = stats
        self._ready = ready
        self._bucket = _Bucket()
        self.passwords = PasswordCheck()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        config = self._watcher.current() if self._watcher is not None else None
        extra = list(config.headers) if config is not None else []

        def answer(status: str, body: bytes, *headers: tuple[str, str]) -> list[bytes]:
            start_response(
                status,
                [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))), *headers, *extra],
            )
            return [body]

        if config is not None and config.rate_interval_s > 0:
            if not self._bucket.take(config.rate_interval_s, config.rate_burst):
                return answer("429 Too Many Requests", b"Too Many Requests\n", ("Retry-After", "1"))
        if config is not None and config.users:
            verdict = self.passwords.check(config.users, environ.get("HTTP_AUTHORIZATION"))
            if verdict == "busy":
                return answer("503 Service Unavailable", b"Busy checking passwords\n", ("Retry-After", "1"))
            if verdict != "ok":
                self._stats.refused(verdict)
                challenge = ("WWW-Authenticate", 'Basic realm="gpuscope", charset="UTF-8"')
                return answer("401 Unauthorized", b"Unauthorized\n", challenge)
        path = environ.get("PATH_INFO", "")
        if path == "/-/healthy":
            return answer("200 OK", b"gpuscope exporter is Healthy.\n")
        if path == "/-/ready":
            if self._ready():
                return answer("200 OK", b"gpuscope exporter is Ready.\n")
            return answer("503 Service Unavailable", b"gpuscope exporter is not ready: no sample yet.\n")

        def start_with_extra(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*headers, *extra], exc_info)

        try:
            return list(self._app(environ, start_with_extra))
        except Exception:  # noqa: BLE001 - one bad scrape is counted, never the end of serving
            self._stats.scrape_error()
            return answer("500 Internal Server Error", b"scrape failed\n")
