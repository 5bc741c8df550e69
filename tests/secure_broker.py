"""A real broker with security on, and clients that present a principal's key (or none).

The key directory is made the operator's way (`zlog keys generate`), with the principals the
test names; the test process then speaks as one principal at a time (`speaking_as`), since
CURVE is set per process (zlog/transport/curve.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from zlog import cli
from zlog.client import Admin, NewTopic
from zlog.transport import curve
from zlog.transport.curve_keys import PRINCIPALS_DIR, client_security
from zlog.transport.messages.security import AclEntry, AlterSecurityRequestV0
from zlog_testbed.broker_process import BrokerProcess, broker_process

ADMIN = "admin"  # the tests' super-user
SETUP_TIMEOUT_MS = 30_000


def make_keys(directory: Path, principals: Sequence[str]) -> Path:
    """The cluster's keys and one pair per principal, as `zlog keys generate` writes them."""
    assert cli.main(["keys", "generate", str(directory)]) == 0
    assert cli.main(["keys", "generate", str(directory), *principals]) == 0
    return directory


def secret_key(keys: Path, principal: str) -> Path:
    return keys / PRINCIPALS_DIR / f"{principal}.key_secret"


def security_args(keys: Path, *, super_users: Sequence[str] = (ADMIN,)) -> tuple[str, ...]:
    return ("--security", "true", "--security-keys-dir", str(keys),
            "--super-users", ",".join(super_users))


@contextlib.contextmanager
def speaking_as(keys: Path | None, principal: str = ADMIN, *,
                key_file: Path | None = None) -> Iterator[None]:
    """This process's new connections present `principal`'s key (`key_file` instead, when
    given; no key at all when `keys` is None), and none afterwards."""
    if keys is None:
        curve.install(None)
    else:
        curve.install(client_security(key_file or secret_key(keys, principal),
                                      keys / "server.key"))
    try:
        yield
    finally:
        curve.install(None)


@contextlib.contextmanager
def secure_broker(keys: Path, log_dir: Path, *, workers: int = 1,
                  extra_args: Sequence[str] = (), topics: Sequence[str] = (),
                  acls: Sequence[AclEntry] = ()) -> Iterator[BrokerProcess]:
    """A started broker with security on, its `topics` (one partition each) served and its
    `acls` set; the test process speaks as the super-user while it starts (its readiness
    probe is a client too)."""
    with speaking_as(keys), broker_process(
            log_dir, workers=workers,
            extra_args=(*security_args(keys), *extra_args)) as broker:
        with Admin(broker.endpoint, request_timeout_ms=SETUP_TIMEOUT_MS) as admin:
            if topics:
                admin.create_topics([NewTopic(name, 1) for name in topics])
            if acls:
                admin.alter_security(AlterSecurityRequestV0(acls_add=tuple(acls)))
        for name in topics:
            broker.data_endpoint(name, 0)
        curve.install(None)
        yield broker
