"""Which server of the matrix stands in for a live server when `densekv analyze` replays
its keys: the same line where the matrix has it, the closest one otherwise; Redis 8 and
Valkey 8.1 (the servers users run today) get their own where scripts/get-servers --all
fetched them."""

from __future__ import annotations

import pytest

from densekv.tools.analyze.replay import stand_ins


@pytest.mark.parametrize(("flavor", "version", "want"), [
    ("redis", "7.0.15", ("redis-7.0",)),
    ("redis", "7.2.4", ("redis-7.4",)),
    ("redis", "7.4.1", ("redis-7.4",)),
    ("redis", "8.0.2", ("redis-8.0", "redis-7.4")),
    ("redis", "8.2.0", ("redis-8.0", "redis-7.4")),
    ("valkey", "8.0.1", ("valkey-8.0",)),
    ("valkey", "8.1.1", ("valkey-8.1", "valkey-8.0")),
    ("valkey", "9.0.0", ("valkey-9.1",)),
    ("valkey", "9.1.2", ("valkey-9.1",)),
    ("redis", "6.2.14", ()),
    ("keydb", "6.3.4", ()),
])
def test_stand_ins(flavor: str, version: str, want: tuple[str, ...]) -> None:
    assert stand_ins(flavor, version) == want
