"""Sets on the one flow runtime (densekv/flows.py) and the one probe: on every server of
the matrix, the asyncio CompactSet, SetFamily and BloomFilter read the server with the
same probe as the sync ones and so decide the same (limits, layout, partition count,
family encoding, the filter's allocator rounding); and an error of a round trip reaches
the caller through the flow unchanged (a key of another type: WrongType, untouched)."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from densekv.errors import WrongType
from densekv.sets import AsyncCompactSet, AsyncSetFamily, CompactSet, SetFamily
from densekv.sets.bloom import AsyncBloomFilter, BloomFilter
from densekv.tools.server.process import ServerProcess


def test_async_sets_decide_as_the_sync_ones(client: redis.Redis, server: ServerProcess) -> None:
    s = CompactSet(client, "rt", expected=50_000).open()
    fam = SetFamily(client, "rtf", expected_children=100).open()
    bf = BloomFilter(client, "rtb", capacity=5000, error_rate=0.01).open()

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            a = AsyncCompactSet(aclient, "rt2", expected=50_000)
            assert (await a.explain())["server"] == s.explain()["server"]
            assert (await a.explain())["layout"] == s.explain()["layout"]
            assert (await a.ready()).layout.partitions == s.partitions
            afam = AsyncSetFamily(aclient, "rtf2", expected_children=100)
            assert (await afam.ready()).choice == fam._core.choice
            abf = AsyncBloomFilter(aclient, "rtb2", capacity=5000, error_rate=0.01)
            await abf.ready()
            assert abf.spec == bf.spec
        finally:
            await aclient.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("layout", ["dense", "hash"])
def test_a_round_trip_error_reaches_the_caller(client: redis.Redis, server: ServerProcess, layout: str) -> None:
    s = CompactSet(client, "err", layout=layout, expected=100, partitions=1).open()
    s.add(b"\x01" * 16)
    key = s._core.layout.key(0)
    client.delete(key)
    client.set(key, b"not a set")
    with pytest.raises(WrongType):
        s.add(b"\x02" * 16)
    with pytest.raises(WrongType):
        s.contains_many([b"\x02" * 16, b"\x03" * 16])
    assert client.get(key) == b"not a set"

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            a = AsyncCompactSet(aclient, "err", layout=layout, expected=100, partitions=1)
            with pytest.raises(WrongType):
                await a.add(b"\x02" * 16)
        finally:
            await aclient.aclose()

    asyncio.run(main())
    assert client.get(key) == b"not a set"
