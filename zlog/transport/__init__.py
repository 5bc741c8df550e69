"""The wire: the only package that knows frames (docs/protocol.md is its contract).

api.py (keys and versions), messages.py (one frozen dataclass per api and version), wire.py
(bounded reading), struct_bodies.py and json_bodies.py (body codecs), codec.py (headers and
frame lists), sockets.py (zmq setup and copy-free frame moving), rpc.py (client calls).
"""
