"""The set-family contract: per-parent small sets behave like a dict of Python sets (both
encodings, every server present, and a cluster); per-parent expiry; an outlier parent
leaves the others compact and is named by stats(); a key of another type is untouched."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
import redis
import redis.asyncio

from densekv.errors import BadItem, WrongType
from densekv.sets import AsyncSetFamily, SetFamily
from densekv.sets.compact import limits_from_probe
from densekv.tools.server.process import ServerProcess
from tests.behaviour.seeds import shows_seed, stable_seed


def encodings_for(client: object) -> list[str]:
    return ["hash", "set"] if limits_from_probe(client).listpack_sets else ["hash"]


def run_against_model(fam: SetFamily, seed: int, steps: int = 150) -> None:
    with shows_seed(seed):
        _run_against_model(fam, seed, steps)


def _run_against_model(fam: SetFamily, seed: int, steps: int = 150) -> None:
    rng = random.Random(seed)
    parents = ["org-1", "org-2", 3, b"org\xff4"]
    children = [f"job-{i}" for i in range(12)] + [7, 8]
    model: dict[bytes, set[bytes]] = {}

    def b(x: object) -> bytes:
        return x if isinstance(x, bytes) else str(x).encode()

    for i in range(steps):
        op = rng.choice(["add", "add", "add", "many", "in", "remove", "members", "count", "discard"])
        p, c = rng.choice(parents), rng.choice(children)
        mine = model.setdefault(b(p), set())
        where = f"step {i} {op} ({fam.encoding})"
        if op == "add":
            assert fam.add(p, c) == (b(c) not in mine), where
            mine.add(b(c))
        elif op == "many":
            kids = rng.sample(children, 4)
            want = []
            for k in kids:
                want.append(b(k) not in mine)
                mine.add(b(k))
            assert fam.add_many(p, kids) == want, where
        elif op == "in":
            assert fam.contains(p, c) == (b(c) in mine), where
        elif op == "remove":
            assert fam.remove(p, c) == (b(c) in mine), where
            mine.discard(b(c))
        elif op == "members":
            assert fam.members(p) == mine, where
        elif op == "count":
            assert fam.count(p) == len(mine), where
        elif op == "discard":
            assert fam.discard_parent(p) == bool(mine), where
            mine.clear()
    for p in parents:
        assert fam.members(p) == model.get(b(p), set())


def test_families_match_the_model(client: redis.Redis, server_name: str) -> None:
    for enc in encodings_for(client):
        run_against_model(SetFamily(client, f"f{enc}", encoding=enc).open(), seed=stable_seed(server_name, enc))


def test_families_match_the_model_on_a_cluster(cluster_client: redis.RedisCluster) -> None:
    for enc in encodings_for(cluster_client):
        run_against_model(SetFamily(cluster_client, f"c{enc}", encoding=enc, ttl=600).open(), seed=3, steps=100)


def test_per_parent_expiry(client: redis.Redis) -> None:
    fam = SetFamily(client, "exp", ttl=600).open()
    fam.add("a", "x")
    fam.add("b", "y")
    ttl = fam.ttl("a")
    assert ttl is not None and 590 < ttl <= 600
    assert fam.expire("b", 0.05)
    time.sleep(0.3)
    assert fam.members("b") == set() and fam.count("b") == 0
    assert fam.members("a") == {b"x"}
    assert SetFamily(client, "noexp").open().add("c", "z") and SetFamily(client, "noexp").open().ttl("c") is None


def test_an_outlier_parent_affects_no_other_and_is_named(client: redis.Redis) -> None:
    for enc in encodings_for(client):
        fam = SetFamily(client, f"out{enc}", encoding=enc, children=str).open()
        limit = fam._core.choice.limit
        for p in range(5):
            fam.add_many(f"small-{p}", [f"job-{i}" for i in range(20)])
        fam.add_many("big", [f"job-{i}" for i in range(limit + 10)])
        assert fam.count("big") == limit + 10
        for p in range(5):
            assert client.object("encoding", fam._core.key(f"small-{p}")) == b"listpack"
        stats = fam.stats()
        assert [o["parent"] for o in stats["outliers"]] == ["big"] and stats["warnings"]
        assert fam.members("small-0") == {f"job-{i}" for i in range(20)}
        fam.discard_parent("big")
        assert fam.stats()["outliers"] == []


def test_choice_per_server(client: redis.Redis) -> None:
    sets = limits_from_probe(client).listpack_sets
    assert SetFamily(client, "c1").open().encoding == "hash"  # hash stays compact longer
    assert SetFamily(client, "c2", expected_children=50).open().encoding == ("set" if sets else "hash")


def test_bad_input_and_other_types(client: redis.Redis) -> None:
    fam = SetFamily(client, "bad").open()
    with pytest.raises(BadItem):
        fam.add("p", 1.5)
    with pytest.raises(BadItem):
        fam.add_many("p", ["ok", None])
    assert client.dbsize() == 0
    client.set(fam._core.key("p"), "theirs")
    with pytest.raises(WrongType):
        fam.add("p", "c")
    with pytest.raises(WrongType):
        fam.discard_parent("p")
    assert client.get(fam._core.key("p")) == b"theirs" and client.ttl(fam._core.key("p")) == -1
    with pytest.raises(ValueError):
        SetFamily(client, "x", ttl=0).open()


def test_async_twin(server: ServerProcess) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        await client.flushall()
        fam = AsyncSetFamily(client, "af", ttl=100, children=int)
        assert await fam.add("p", 1) and not await fam.add("p", 1)
        assert await fam.add_many("p", [2, 3]) == [True, True]
        assert await fam.members("p") == {1, 2, 3} and await fam.count("p") == 3
        assert await fam.contains("p", 2) and await fam.remove("p", 2)
        assert (await fam.stats())["outliers"] == []
        assert await fam.discard_parent("p") and await fam.count("p") == 0
        await client.aclose()

    asyncio.run(main())
