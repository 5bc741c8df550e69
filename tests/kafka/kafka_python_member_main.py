"""A kafka-python group member in a process of its own, for a test to kill -9: it joins
GROUP on TOPIC and polls until killed, printing its assignment whenever it changes."""

from __future__ import annotations

import sys

from kafka import KafkaConsumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, session_timeout_ms=3_000,
                             heartbeat_interval_ms=500, max_poll_interval_ms=10_000)
    shown: list[int] = []
    while True:
        consumer.poll(timeout_ms=100)
        assigned = sorted(tp.partition for tp in consumer.assignment())
        if assigned != shown:
            shown = assigned
            print(" ".join(map(str, assigned)), flush=True)


if __name__ == "__main__":
    main()
