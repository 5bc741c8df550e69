"""A worker's Kafka port as the supervisor starts it: the options and their command line.

The supervisor's worker pool writes the flags, the worker reads them back
(zlog/broker/data/kafka_port.py serves the port), so the two cannot drift apart.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from zlog.broker.config import BrokerConfig, split_host_port


@dataclass(frozen=True, slots=True)
class KafkaPortOptions:
    """Where a worker's Kafka port listens and where its broker's gateway is."""

    host: str  # advertised, as clients must spell it
    bind_host: str = ""  # where it binds ("": host)
    preferred_port: int = 0  # the replaced worker's port, tried first (0: any)
    gateway: str = ""  # host:port of the supervisor's Kafka port ("": none to relay to), or
    # with security on "@name", the gateway's relay socket (kafka/relay.py)
    tls_cert_file: Path | None = None  # security on: SASL_SSL with these (kafka/tls.py)
    tls_key_file: Path | None = None
    tls_ca_file: Path | None = None

    @classmethod
    def from_arguments(cls, args: argparse.Namespace) -> KafkaPortOptions | None:
        if not args.kafka_host:
            return None
        return cls(args.kafka_host, args.kafka_bind_host, args.kafka_preferred_port,
                   args.kafka_gateway, args.kafka_tls_cert_file, args.kafka_tls_key_file,
                   args.kafka_tls_ca_file)

    def as_flags(self) -> list[str]:
        """The worker's command line for these options (add_kafka_arguments reads it)."""
        flags = ["--kafka-host", self.host, "--kafka-gateway", self.gateway]
        if self.bind_host and self.bind_host != self.host:
            flags += ["--kafka-bind-host", self.bind_host]
        if self.preferred_port:
            flags += ["--kafka-preferred-port", str(self.preferred_port)]
        for flag, path in (("--kafka-tls-cert-file", self.tls_cert_file),
                           ("--kafka-tls-key-file", self.tls_key_file),
                           ("--kafka-tls-ca-file", self.tls_ca_file)):
            if path is not None:
                flags += [flag, str(path)]
        return flags


def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kafka-host", default="",
                        help="advertised address of the worker's Kafka port (empty: no port)")
    parser.add_argument("--kafka-bind-host", default="",
                        help="where the Kafka port binds, when clients reach it at --kafka-host")
    parser.add_argument("--kafka-preferred-port", type=int, default=0,
                        help="the replaced worker's Kafka port, tried first (0: any)")
    parser.add_argument("--kafka-gateway", default="",
                        help="HOST:PORT of this broker's Kafka gateway, for what a worker "
                             "does not serve (@NAME: its relay socket, security on)")
    parser.add_argument("--kafka-tls-cert-file", type=Path, default=None,
                        help="security on: the port speaks SASL_SSL with this certificate")
    parser.add_argument("--kafka-tls-key-file", type=Path, default=None)
    parser.add_argument("--kafka-tls-ca-file", type=Path, default=None)


def worker_kafka_options(config: BrokerConfig, gateway: str) -> KafkaPortOptions:
    """The workers' Kafka ports of a broker with a Kafka listener: bound where its gateway
    binds, on ports the OS picks, advertised on the host the gateway is advertised on, and
    relaying to the gateway at `gateway` (host:port on this host, or its relay socket); with
    security on, speaking SASL_SSL with the gateway's certificate."""
    listen_host, _port = split_host_port(config.kafka_listen)
    return KafkaPortOptions(config.kafka_advertised_host, listen_host or "0.0.0.0", 0, gateway,
                            config.kafka_tls_cert_file, config.kafka_tls_key_file,
                            config.kafka_tls_ca_file)
