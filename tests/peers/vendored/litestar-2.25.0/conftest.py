"""Keeps densekv's own pytest run out of Litestar's vendored tests: they run only in the
subprocess of tests/peers/test_litestar_suite.py, under Litestar's settings and
tests/peers/litestar_peer_plugin.py (which passes --confcutdir, so this file is not loaded
there). Not one of Litestar's files (it is not in SHA256SUMS)."""

collect_ignore = ["tests"]
