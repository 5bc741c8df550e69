"""Kafka's binary protocol as a second door into zlog (docs/kafka.md).

The pieces every Kafka port shares live here, once: framing (framing.py), parsing a request
with kio (requests.py), the table of API keys and versions zlog serves (api_versions.py), and
building a response or an error response at the request's own version (responses.py).
"""
