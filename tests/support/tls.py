"""Certificates made by ``openssl`` for the exporter's TLS tests and benchmark: a CA, a server
certificate for 127.0.0.1 (IP and DNS SANs), a client certificate, and a bcrypt hash maker."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import bcrypt

__all__ = ["Pki", "make_pki", "have_openssl", "bcrypt_hash", "client_context"]

CLIENT_SAN = "prometheus.test"


@dataclass(frozen=True)
class Pki:
    """The files of one test PKI (every path absolute)."""

    folder: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # a client certificate signed by another CA
    stranger_key: Path


def have_openssl() -> bool:
    """True when the ``openssl`` command is on PATH."""
    return shutil.which("openssl") is not None


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _new_key(kind: str) -> list[str]:
    return ["-newkey", "rsa:2048"] if kind == "rsa" else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]


def _ca(folder: Path, name: str, kind: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    _openssl(
        "req", "-x509", *_new_key(kind), "-nodes", "-days", "2", "-subj", f"/CN={name}",
        "-keyout", key.name, "-out", cert.name,
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=folder,
    )  # fmt: skip
    return cert, key


def _leaf(folder: Path, name: str, ca: tuple[Path, Path], kind: str, san: str, usage: str) -> tuple[Path, Path]:
    cert, key, csr, ext = (folder / f"{name}.{suffix}" for suffix in ("crt", "key", "csr", "ext"))
    ext.write_text(
        f"subjectAltName={san}\nextendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    request = ("-nodes", "-subj", f"/CN={name}", "-keyout", key.name, "-out", csr.name)
    _openssl("req", *_new_key(kind), *request, cwd=folder)
    _openssl(
        "x509", "-req", "-in", csr.name, "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
        "-days", "2", "-out", cert.name, "-extfile", ext.name,
        cwd=folder,
    )  # fmt: skip
    return cert, key


def make_pki(folder: Path, kind: str = "ec") -> Pki:
    """A CA, a server certificate for 127.0.0.1/localhost, a client certificate (SAN
    ``DNS:prometheus.test``) and a stranger's client certificate from another CA, in ``folder``.
    ``kind`` is ``ec`` (P-256) or ``rsa`` (2048 bits)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = _ca(folder, "ca", kind)
    server = _leaf(folder, "server", ca, kind, "IP:127.0.0.1,DNS:localhost", "serverAuth")
    client = _leaf(folder, "client", ca, kind, f"DNS:{CLIENT_SAN}", "clientAuth")
    other_ca = _ca(folder, "other-ca", kind)
    stranger = _leaf(folder, "stranger", other_ca, kind, f"DNS:{CLIENT_SAN}", "clientAuth")
    return Pki(folder, *ca, *server, *client, *stranger)


def bcrypt_hash(password: str, cost: int = 4) -> str:
    """A bcrypt hash of ``password`` (``$2b$``; cost 4 keeps tests fast)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(cost)).decode()


def client_context(pki: Pki, with_certificate: bool = True) -> ssl.SSLContext:
    """A client context that trusts the test CA (and presents the client certificate)."""
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if with_certificate:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context
