"""Consumer groups: the pure coordinator logic (no sockets, threads or clocks).

docs/groups.md describes the design. Time (`now_ms`) and randomness (member ids) are inputs, so
the tests replay every run exactly.
"""
