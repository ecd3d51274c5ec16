"""``--web-config FILE``: the Prometheus exporter-toolkit web configuration (TLS, client
certificates, basic auth with bcrypt hashes, response headers, a rate limit).

The fields are those of exporter-toolkit's ``docs/web-configuration.md``; relative file names are
read beside the configuration file. Every problem is one :class:`BadInputError` line naming the
file and the field (``--web-config web.yml: tls_server_config.min_version: ...``); a secret (a
key, a password hash) is never part of the message.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuscope.errors import BadInputError

__all__ = ["WebConfig", "load_web_config", "files_signature", "CLIENT_AUTH_TYPES", "CIPHER_SUITES"]

_TOP = ("tls_server_config", "http_server_config", "basic_auth_users", "rate_limit")
_TLS = (
    "cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file",
    "client_allowed_sans", "min_version", "max_version", "cipher_suites", "prefer_server_cipher_suites",
    "curve_preferences",
)  # fmt: skip
_HTTP = ("http2", "headers")
_RATE = ("interval", "burst")

#: client_auth_type -> ssl verify mode; None where Python's ssl cannot do what the name asks.
CLIENT_AUTH_TYPES: dict[str, ssl.VerifyMode | None] = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
    "RequestClientCert": None,
    "RequireAnyClientCert": None,
    "RequireClientCert": None,
}
_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
#: Go's tls.CipherSuites() names (what exporter-toolkit accepts) -> OpenSSL names. The TLS 1.3
#: suites are accepted and, as in Go, not configurable (OpenSSL's defaults apply).
CIPHER_SUITES: dict[str, str | None] = {
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
_CURVES = {"CurveP256": "prime256v1", "CurveP384": "secp384r1", "CurveP521": "secp521r1", "X25519": "X25519"}
#: The response headers exporter-toolkit lets a configuration set, with their allowed values.
_HEADERS: dict[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}
_BCRYPT = re.compile(r"\$2[abxy]?\$(\d\d)\$[./A-Za-z0-9]{53}")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class WebConfig:
    """One loaded web configuration. ``tls`` is None when it turns TLS off (plain HTTP)."""

    path: str
    tls: ssl.SSLContext | None = None
    client_auth_type: str = "NoClientCert"
    client_allowed_sans: tuple[str, ...] = ()
    #: user -> bcrypt hash; empty: no basic auth
    users: Mapping[str, bytes] = field(default_factory=dict)
    headers: tuple[tuple[str, str], ...] = ()
    #: token bucket: one request per ``rate_interval_s`` with bursts of ``rate_burst``; 0 = off
    rate_interval_s: float = 0.0
    rate_burst: int = 0
    #: the configuration file and every file it names: a change to any of them reloads it
    files: tuple[str, ...] = ()

    @property
    def protected(self) -> bool:
        """True when it asks for TLS or basic auth (what serving off loopback needs)."""
        return self.tls is not None or bool(self.users)

    def describe(self) -> str:
        """A few words for the start line, e.g. ``TLS, client certificates required, basic auth``."""
        parts = []
        if self.tls is not None:
            parts.append("TLS")
            if self.client_auth_type == "RequireAndVerifyClientCert":
                parts.append("client certificates required")
            elif self.client_auth_type == "VerifyClientCertIfGiven":
                parts.append("client certificates verified if given")
        if self.users:
            parts.append(f"basic auth ({len(self.users)} user{'s' if len(self.users) != 1 else ''})")
        if self.rate_interval_s > 0:
            parts.append("rate limited")
        return ", ".join(parts) or "no TLS, no auth"


class _Problem(Exception):
    """One field's problem; :func:`load_web_config` adds the file name."""


def files_signature(paths: tuple[str, ...]) -> tuple[tuple[float, int, int], ...]:
    """(mtime_ns, size, inode) of each file, (0, -1, 0) for one that cannot be read: compares
    unequal as soon as any of them is replaced, edited or removed."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append((0.0, -1, 0))
            continue
        out.append((float(st.st_mtime_ns), st.st_size, st.st_ino))
    return tuple(out)


def load_web_config(path: str) -> WebConfig:
    """Read and check ``path``. Raises :class:`BadInputError` (exit 3) with one line."""
    import yaml  # here: 13 ms that `gpuscope log` without --web-config need not pay

    try:
        with open(path, "rb") as handle:
            text = handle.read(1 << 20)
    except OSError as exc:
        raise BadInputError(f"--web-config {path}: cannot read: {exc.strerror or exc}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise BadInputError(f"--web-config {path}: {where}{problem}") from None
    try:
        return _build(path, document)
    except _Problem as exc:
        raise BadInputError(f"--web-config {path}: {exc}") from None


def _mapping(value: Any, where: str, known: tuple[str, ...]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Problem(f"{where}: expected a mapping of fields")
    for key in value:
        if not isinstance(key, str) or key not in known:
            raise _Problem(f"{where}: unknown field {str(key)!r} (known: {', '.join(known)})")
    return value


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Problem(f"{where}: expected a string")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _Problem(f"{where}: expected a list of strings")
    return list(value)


def _choice(value: Any, where: str, choices: Mapping[str, Any]) -> str:
    text = _string(value, where)
    if text not in choices:
        raise _Problem(f"{where}: {text!r} is not one of {', '.join(choices)}")
    return text


def _build(path: str, document: Any) -> WebConfig:
    top = _mapping(document, "top level", _TOP)
    base = os.path.dirname(os.path.abspath(path))
    files = [os.path.abspath(path)]
    tls, client_auth, sans = _tls(_mapping(top.get("tls_server_config"), "tls_server_config", _TLS), base, files)
    http = _mapping(top.get("http_server_config"), "http_server_config", _HTTP)
    if not isinstance(http.get("http2", True), bool):
        raise _Problem("http_server_config.http2: expected true or false")
    headers = _headers(http.get("headers"))
    users = _users(top.get("basic_auth_users"))
    rate = _mapping(top.get("rate_limit"), "rate_limit", _RATE)
    interval_s = _duration(rate.get("interval"), "rate_limit.interval")
    burst = rate.get("burst", 0)
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 0:
        raise _Problem("rate_limit.burst: expected a whole number >= 0")
    if interval_s > 0 and burst == 0:
        raise _Problem("rate_limit.burst: must be at least 1 when rate_limit.interval is set (0 refuses every request)")
    return WebConfig(
        path=path,
        tls=tls,
        client_auth_type=client_auth,
        client_allowed_sans=tuple(sans),
        users=users,
        headers=headers,
        rate_interval_s=interval_s,
        rate_burst=int(burst),
        files=tuple(dict.fromkeys(files)),
    )


def _tls(section: dict[str, Any], base: str, files: list[str]) -> tuple[ssl.SSLContext | None, str, list[str]]:
    where = "tls_server_config"
    for name in ("cert", "key", "client_ca", "cert_file", "key_file", "client_ca_file", "client_auth_type"):
        _string(section.get(name), f"{where}.{name}")
    if not any(section.get(name) for name in ("cert", "key", "client_ca", "cert_file", "key_file", "client_ca_file")):
        if section.get("client_auth_type") not in (None, "", "NoClientCert"):
            raise _Problem(f"{where}.client_auth_type: needs cert_file and key_file (TLS) as well")
        return None, "NoClientCert", []
    for inline, named in (("cert", "cert_file"), ("key", "key_file"), ("client_ca", "client_ca_file")):
        if section.get(inline) and section.get(named):
            raise _Problem(f"{where}: give {inline} or {named}, not both")
    if not (section.get("cert") or section.get("cert_file")):
        raise _Problem(f"{where}: missing one of cert or cert_file")
    if not (section.get("key") or section.get("key_file")):
        raise _Problem(f"{where}: missing one of key or key_file")
    minimum = _VERSIONS[_choice(section.get("min_version") or "TLS12", f"{where}.min_version", _VERSIONS)]
    maximum = _VERSIONS[_choice(section.get("max_version") or "TLS13", f"{where}.max_version", _VERSIONS)]
    if minimum > maximum:
        raise _Problem(f"{where}: min_version is above max_version")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = minimum, maximum
    context.num_tickets = 0  # every scrape is a fresh connection and scrapers do not resume sessions
    _load_pair(context, section, base, files)
    client_auth = _choice(
        section.get("client_auth_type") or "NoClientCert", f"{where}.client_auth_type", CLIENT_AUTH_TYPES
    )
    mode = CLIENT_AUTH_TYPES[client_auth]
    if mode is None:
        raise _Problem(
            f"{where}.client_auth_type: {client_auth} (a client certificate nobody verifies) is not supported; "
            "use RequireAndVerifyClientCert with client_ca_file"
        )
    has_ca = bool(section.get("client_ca") or section.get("client_ca_file"))
    if has_ca and mode == ssl.CERT_NONE:
        raise _Problem(f"{where}: client CAs are given without a client_auth_type (use RequireAndVerifyClientCert)")
    if not has_ca and mode != ssl.CERT_NONE:
        raise _Problem(f"{where}.client_auth_type: {client_auth} needs client_ca_file (or client_ca)")
    if has_ca:
        _load_ca(context, section, base, files)
    context.verify_mode = mode
    sans = _strings(section.get("client_allowed_sans"), f"{where}.client_allowed_sans")
    if "client_allowed_sans" in section and mode != ssl.CERT_REQUIRED:
        raise _Problem(f"{where}.client_allowed_sans: needs client_auth_type RequireAndVerifyClientCert")
    _ciphers(context, section)
    prefer = section.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise _Problem(f"{where}.prefer_server_cipher_suites: expected true or false")
    if prefer:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    curves = _strings(section.get("curve_preferences"), f"{where}.curve_preferences")
    for curve in curves:
        if curve not in _CURVES:
            raise _Problem(f"{where}.curve_preferences: {curve!r} is not one of {', '.join(_CURVES)}")
    if curves:  # Python's ssl sets one group: the first preferred
        context.set_ecdh_curve(_CURVES[curves[0]])
    return context, client_auth, sans


def _file(section: dict[str, Any], name: str, base: str, files: list[str]) -> str:
    path = os.path.join(base, section[name])
    if not os.access(path, os.R_OK):
        raise _Problem(f"tls_server_config.{name}: cannot read {path}")
    files.append(path)
    return path


def _load_pair(context: ssl.SSLContext, section: dict[str, Any], base: str, files: list[str]) -> None:
    cert = _file(section, "cert_file", base, files) if section.get("cert_file") else None
    key = _file(section, "key_file", base, files) if section.get("key_file") else None
    with tempfile.TemporaryDirectory(prefix="gpuscope-tls-") as folder:  # inline PEM: ssl reads only files
        if cert is None:
            cert = os.path.join(folder, "cert.pem")
            _write_private(cert, section["cert"])
        if key is None:
            key = os.path.join(folder, "key.pem")
            _write_private(key, section["key"])
        asked: list[bool] = []

        def no_passphrase() -> bytes:  # else OpenSSL would prompt on the terminal and wait
            asked.append(True)
            return b""

        try:
            context.load_cert_chain(cert, key, password=no_passphrase)
        except ssl.SSLError as exc:
            if asked:
                raise _Problem("tls_server_config: the key is encrypted; give an unencrypted key (mode 0600)") from None
            raise _Problem(
                f"tls_server_config: the certificate and key do not load as a pair ({exc.reason or exc.strerror})"
            ) from None
        except OSError as exc:
            raise _Problem(f"tls_server_config: cannot load the certificate and key ({exc.strerror or exc})") from None


def _write_private(path: str, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


def _load_ca(context: ssl.SSLContext, section: dict[str, Any], base: str, files: list[str]) -> None:
    try:
        if section.get("client_ca_file"):
            context.load_verify_locations(cafile=_file(section, "client_ca_file", base, files))
        else:
            context.load_verify_locations(cadata=section["client_ca"])
    except (ssl.SSLError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or "no certificate found"
        raise _Problem(f"tls_server_config: client CA certificates do not load ({reason})") from None
    if not context.get_ca_certs():
        raise _Problem("tls_server_config: the client CA file holds no certificate")


def _ciphers(context: ssl.SSLContext, section: dict[str, Any]) -> None:
    names = _strings(section.get("cipher_suites"), "tls_server_config.cipher_suites")
    openssl = []
    for name in names:
        if name not in CIPHER_SUITES:
            raise _Problem(f"tls_server_config.cipher_suites: unknown cipher {name!r} (Go's tls.CipherSuites names)")
        if CIPHER_SUITES[name] is not None:
            openssl.append(CIPHER_SUITES[name])
    if openssl:
        context.set_ciphers(":".join(str(name) for name in openssl))


def _headers(value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise _Problem("http_server_config.headers: expected a mapping of header -> value")
    out = []
    for name, text in value.items():
        if name not in _HEADERS:
            known = ", ".join(_HEADERS)
            raise _Problem(f"http_server_config.headers: {str(name)!r} can not be configured (only {known})")
        text = _string(text, f"http_server_config.headers.{name}")
        allowed = _HEADERS[name]
        if allowed and text not in allowed:
            raise _Problem(f"http_server_config.headers.{name}: {text!r} is not one of {', '.join(allowed)}")
        if "\r" in text or "\n" in text:
            raise _Problem(f"http_server_config.headers.{name}: a value cannot hold a line break")
        if text:
            out.append((name, text))
    return tuple(out)


def _users(value: Any) -> dict[str, bytes]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Problem("basic_auth_users: expected a mapping of user -> bcrypt hash")
    users: dict[str, bytes] = {}
    for user, hashed in value.items():
        if not isinstance(user, str) or not user or ":" in user:
            raise _Problem(f"basic_auth_users: user {str(user)!r} is not a name (non-empty, no ':')")
        if not isinstance(hashed, str):
            raise _Problem(f"basic_auth_users.{user}: expected a bcrypt hash string")
        match = _BCRYPT.fullmatch(hashed)
        if match is None or not 4 <= int(match.group(1)) <= 31:
            raise _Problem(
                f"basic_auth_users.{user}: not a bcrypt hash (make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n')"
            )
        users[user] = hashed.encode("ascii")
    return users


def _duration(value: Any, where: str) -> float:
    """A Go duration (``15s``, ``100ms``, ``1m30s``, ``0``) in seconds."""
    if value is None or value == 0:
        return 0.0
    text = _string(value, where)
    if text == "0":
        return 0.0
    total, position = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        position = match.end()
    if position != len(text) or not text:
        raise _Problem(f"{where}: {text!r} is not a duration such as 1s, 100ms or 1m30s")
    return total
