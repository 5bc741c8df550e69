"""`python bench/kafka_bench.py --sasl-ssl`: what SASL_SSL costs the Kafka data path.

Two fresh brokers in turn, the first with security off (its Kafka listener PLAINTEXT), the
second with security on (CURVE on its ZeroMQ sockets, its Kafka listener SASL_SSL with a
certificate of a throwaway CA). Against each, confluent-kafka's produce phase (librdkafka's
batching, acks=1) and its consume phase reading that back, each client in a process of its
own. On the secured broker the client logs in with SCRAM-SHA-256 as a user that is not a
super-user, so every request takes the ACL path. The report gives both and the cost in
percent; under TLS a worker copies each Fetch's stored batches into the cipher.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any, Final

from bench.broker_bench import Broker, create_topic
from bench.kafka_bench import CONSUMER_GROUP, _run
from zlog.client import Admin
from zlog.client.scram import scram_user
from zlog.transport import curve
from zlog.transport.curve_keys import PRINCIPALS_DIR, client_security, generate_key_pair
from zlog.transport.messages.security import AclEntry, AlterSecurityRequestV0
from zlog_testbed.free_ports import free_port
from zlog_testbed.tls_certs import make_tls_files

ADMIN: Final = "admin"
USER: Final = "bench"
PASSWORD: Final = "bench-password"
TOPIC: Final = "kafka-sasl"
CALL_TIMEOUT_MS: Final = 10_000


def _phases(args: argparse.Namespace) -> dict[str, float]:
    produced = _run(args, "kafka-produce", TOPIC)
    consumed = _run(args, "kafka-consume", TOPIC, records=produced["records"])
    return {"produce_records_per_s": produced["measured_records"] / produced["elapsed_s"],
            "consume_records_per_s": consumed["records"] / consumed["elapsed_s"]}


def _plaintext(args: argparse.Namespace) -> dict[str, float]:
    args.bootstrap, args.client_config = f"127.0.0.1:{free_port()}", ""
    broker = Broker(1, extra_args=["--kafka-listen", args.bootstrap])
    try:
        broker.wait_ready()
        create_topic(broker.endpoint, TOPIC)
        return _phases(args)
    finally:
        broker.stop()


def _sasl_ssl(args: argparse.Namespace, directory: Path) -> dict[str, float]:
    keys = directory / "keys"
    generate_key_pair(keys, "server")
    for name in ("broker", ADMIN):
        generate_key_pair(keys / PRINCIPALS_DIR, name)
    tls = make_tls_files(directory / "tls")
    args.bootstrap = f"127.0.0.1:{free_port()}"
    args.client_config = json.dumps({
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": str(tls.ca_file)})
    curve.install(client_security(keys / PRINCIPALS_DIR / f"{ADMIN}.key_secret",
                                  keys / "server.key"))
    broker = Broker(1, extra_args=[
        "--kafka-listen", args.bootstrap, "--security", "true", "--security-keys-dir",
        str(keys), "--super-users", ADMIN, "--kafka-tls-cert-file", str(tls.cert_file),
        "--kafka-tls-key-file", str(tls.key_file)])
    try:
        broker.wait_ready()
        create_topic(broker.endpoint, TOPIC)
        with Admin(broker.endpoint, request_timeout_ms=CALL_TIMEOUT_MS) as admin:
            admin.alter_security(AlterSecurityRequestV0(
                acls_add=(*(AclEntry(USER, "topic", TOPIC, operation)
                            for operation in ("read", "write")),
                          AclEntry(USER, "group", CONSUMER_GROUP, "read")),
                users_set=(scram_user(USER, PASSWORD),)))
        return _phases(args)
    finally:
        curve.install(None)
        broker.stop()


def run_sasl_ab(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="zkb-sasl-") as directory:
        plaintext = _plaintext(args)
        sasl_ssl = _sasl_ssl(args, Path(directory))
    figures: dict[str, Any] = {"plaintext": plaintext, "sasl_ssl": sasl_ssl}
    for key in ("produce_records_per_s", "consume_records_per_s"):
        figures[f"{key}_cost_percent"] = 100 * (1 - sasl_ssl[key] / plaintext[key])
    return figures
