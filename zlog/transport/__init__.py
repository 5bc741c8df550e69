"""The wire: the only package that knows frames (docs/protocol.md is its contract).

api.py (keys and versions), messages/ (one frozen dataclass per api and version, by family,
each field annotated with its wire type from wire_types.py), wire.py (bounded reading), the
body codecs (json_codec.py for every JSON body, from the classes' annotations; struct_bodies.py
and offset_commit_bodies.py by hand for the data path; kafka_codec.py for Kafka's own
primitives), codec.py (headers and frame lists), sockets.py (zmq setup and copy-free frame
moving), rpc.py (client calls).
"""
