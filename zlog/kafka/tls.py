"""The Kafka listener's TLS: one server context from the configured PEM files.

TLS 1.2 at least, the certificate chain and key of `kafka_tls_cert_file` and
`kafka_tls_key_file`; with `kafka_tls_ca_file`, a client must present a certificate that
chains to it (it still logs in with SASL: the certificate is not its principal). The gateway
wraps its asyncio listener with it, a worker its non-blocking sockets (kafka_sockets.py).
"""

from __future__ import annotations

import ssl
from pathlib import Path

from zlog.errors import ErrorCode, ZlogError


def server_context(cert_file: Path, key_file: Path, ca_file: Path | None = None) -> ssl.SSLContext:
    """Raises ZlogError (INVALID_CONFIG) naming the file that cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as error:
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        f"kafka_tls_cert_file {cert_file} with kafka_tls_key_file {key_file}: "
                        f"{error}") from None
    if ca_file is not None:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as error:
            raise ZlogError(ErrorCode.INVALID_CONFIG,
                            f"kafka_tls_ca_file {ca_file}: {error}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context
