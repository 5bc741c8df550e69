"""The broker's Kafka gateway process (zlog/kafka_gateway): bound here, started, restarted.

The supervisor binds `kafka_listen` itself, so that an address in use stops `zlog serve` at
start as the control port's does, and hands the listening socket to the gateway process by
descriptor: a gateway that dies is started again on the same socket, after the workers'
restart backoff, and clients only see their connections reset. The gateway runs apart from
the supervisor's loop because it waits on native calls (a JoinGroup waits for its group) and
serves many idle Kafka connections; it reaches the control plane over the native protocol like
any client. It holds a read end of the lifeline pipes and ends once its supervisor is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
from typing import Final

from zlog.broker.config import WILDCARD_HOSTS, BrokerConfig, split_host_port
from zlog.broker.control.workers.pool import worker_environ
from zlog.broker.log_lines import format_module_levels
from zlog.clock import monotonic_ms

log = logging.getLogger("zlog.broker.kafka_gateway")

GATEWAY_MODULE: Final = "zlog.kafka_gateway"
LISTEN_BACKLOG: Final = 1024
STOP_WAIT_S: Final = 5.0


def gateway_security_flags(config: BrokerConfig) -> list[str]:
    """With security on: the broker's keys and the TLS files, for SASL_SSL."""
    if not config.security:
        return []
    assert config.security_keys_dir is not None and config.kafka_tls_cert_file is not None
    assert config.kafka_tls_key_file is not None
    flags = ["--security-keys-dir", str(config.security_keys_dir),
             "--security-principal", config.security_principal,
             "--super-users", ",".join(config.super_users),
             "--tls-cert-file", str(config.kafka_tls_cert_file),
             "--tls-key-file", str(config.kafka_tls_key_file)]
    if config.kafka_tls_ca_file is not None:
        flags += ["--tls-ca-file", str(config.kafka_tls_ca_file)]
    return flags


class KafkaGatewayError(Exception):
    """The Kafka port cannot be bound."""


class KafkaGatewayProcess:
    """One broker's gateway: `start()` binds and starts it, `check()` restarts it once it
    died, `stop()` ends it."""

    def __init__(self, config: BrokerConfig, control_endpoint: str,
                 lifeline_fds: tuple[int, ...]) -> None:
        assert config.kafka_listen and config.kafka_advertised_address is not None
        self.config = config
        self.control_endpoint = control_endpoint
        self.lifeline_fds = lifeline_fds
        self._listener: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._restart_at_ms: int | None = None
        self._backoff_ms = config.worker_restart_backoff_initial_ms
        host, port = config.kafka_advertised_address
        self.advertised = f"{host}:{port}"
        # With security on the workers relay to the gateway's Unix socket, each request with
        # its client's principal (zlog/kafka/relay.py); the name is this broker's.
        self.relay_address = (f"@zlog-kafka-relay-{os.getpid()}-{config.node_id}"
                              if config.security else "")

    @property
    def local_address(self) -> str:
        """host:port at which processes on this host reach the gateway (the workers relay
        to it), or with security on its relay socket; set once bound."""
        if self.relay_address:
            return self.relay_address
        assert self._listener is not None
        host, port = self._listener.getsockname()[:2]
        if host in WILDCARD_HOSTS:
            host = "127.0.0.1" if self._listener.family == socket.AF_INET else "::1"
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def start(self) -> None:
        host, port = split_host_port(self.config.kafka_listen)
        try:
            self._listener = socket.create_server((host, port), backlog=LISTEN_BACKLOG,
                                                  reuse_port=False)
        except OSError as error:
            raise KafkaGatewayError(
                f"cannot listen for Kafka clients on {self.config.kafka_listen}: "
                f"{error.strerror}") from None
        if port == 0:  # the OS chose: clients are told the port it chose
            advertised_host = self.advertised.rpartition(":")[0]
            self.advertised = f"{advertised_host}:{self._listener.getsockname()[1]}"
        self._spawn()

    def _spawn(self) -> None:
        assert self._listener is not None
        config = self.config
        command = [
            sys.executable, "-P", "-m", GATEWAY_MODULE,
            "--listen-fd", str(self._listener.fileno()),
            "--control", self.control_endpoint, "--node-id", str(config.node_id),
            "--advertised", self.advertised, "--rack", config.rack,
            "--default-partitions", str(config.default_partitions),
            "--default-replication-factor", str(config.default_replication_factor),
            "--log-level", config.log_level, "--log-format", config.log_format,
            "--log-levels", format_module_levels(config.log_levels),
        ]
        if self.lifeline_fds:
            command += ["--lifeline-fd", str(self.lifeline_fds[0])]
        command += gateway_security_flags(config)
        if self.relay_address:
            command += ["--relay", self.relay_address]
        # As a worker is started: this zlog first on the module path whatever the working
        # directory, and a process group of its own (a terminal's Ctrl-C reaches only the
        # supervisor, which stops it).
        self._process = subprocess.Popen(
            command, pass_fds=(self._listener.fileno(), *self.lifeline_fds[:1]),
            env=worker_environ(os.environ), stdin=subprocess.DEVNULL, process_group=0)
        log.info("kafka gateway started (pid %d) for Kafka clients at %s://%s",
                 self._process.pid, "SASL_SSL" if config.security else "PLAINTEXT",
                 self.advertised)

    def check(self, now_ms: int | None = None) -> None:
        """Restart the gateway if it died, once its backoff has passed."""
        process = self._process
        now_ms = monotonic_ms() if now_ms is None else now_ms
        if process is not None and process.poll() is not None:
            log.warning("kafka gateway exited with status %s; restarting in %d ms",
                        process.returncode, self._backoff_ms)
            self._process = None
            self._restart_at_ms = now_ms + self._backoff_ms
            self._backoff_ms = min(self._backoff_ms * 2,
                                   self.config.worker_restart_backoff_max_ms)
        if self._process is None and self._restart_at_ms is not None \
                and now_ms >= self._restart_at_ms:
            self._restart_at_ms = None
            self._spawn()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None
