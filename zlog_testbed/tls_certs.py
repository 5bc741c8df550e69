"""A throwaway certificate authority and a server certificate for 127.0.0.1, made with the
openssl command line (Debian's), for the Kafka listener's SASL_SSL tests and benchmark."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = "2"


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca_file: Path  # what a client trusts
    cert_file: Path  # the broker's certificate, signed by the CA
    key_file: Path


def _openssl(*arguments: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *arguments], cwd=cwd, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")


def openssl_installed() -> bool:
    return shutil.which("openssl") is not None


def make_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-days", DAYS, "-subj", "/CN=zlog test CA", cwd=directory)
    (directory / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
             "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=directory)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", DAYS, "-extfile", "san.ext",
             cwd=directory)
    (directory / "server.key").chmod(0o600)
    return TlsFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key")
