"""A confluent-kafka member of KIP-848's protocol (`group.protocol=consumer`) in a process of
its own, for a test to kill -9: it joins GROUP on TOPIC and polls until killed."""

from __future__ import annotations

import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": "consumer", "enable.auto.commit": False})
    consumer.subscribe([topic])
    while True:
        consumer.poll(0.1)


if __name__ == "__main__":
    main()
