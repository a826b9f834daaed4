"""The report's first screen, from canned result records: what to do per kind, and the
seeds' claims against this run's numbers."""

from __future__ import annotations

from typing import Any

import pytest

from densekv.tools.lab.results import RunRecord, ServerStamp, build_document
from densekv.tools.lab.summary import advice, headline, verdicts

STAMP = ServerStamp("valkey-9.1", "valkey", "9.1.2", "libc", {"hash_max_listpack_entries": 512})


def rec(kind: str, variant: str, bpi: float, *, layout: str = "", partitions: int | None = None, n: int = 100_000,
        ops: dict[str, Any] | None = None, params: dict[str, Any] | None = None,
        points: list[dict[str, Any]] | None = None) -> RunRecord:
    return RunRecord.stamped(STAMP, kind=kind, layout=layout or variant.split()[0], variant=variant,
                             partitions=partitions, n=n, bytes_per_item=bpi, ops=ops or {}, params=params or {},
                             points=points or [])


def get(usec: float) -> dict[str, Any]:
    return {"get": {"server_usec_per_call": usec}, "contains_hit": {"server_usec_per_call": usec}}


def small(layout: str, config: str, limit: int, per_entry: dict[int, float]) -> RunRecord:
    return rec("small_sets", f"{layout} ({config} limits)", 60.0, layout=layout, partitions=32,
               params={"config": config, "limits": {"hash-max-listpack-entries": limit}},
               points=[{"n": n, "bytes_per_item": None, "memory_usage_bytes_per_item": v} for n, v in per_entry.items()])


RUNS = [
    rec("sessions", "json", 130.0, ops=get(0.4)), rec("sessions", "dense", 26.0, partitions=256, ops=get(0.35)),
    rec("sessions", "zset seed 1M", 52.0, layout="zset", partitions=2048),
    rec("sets", "set P=1", 54.0, layout="set", partitions=1, ops=get(0.1)),
    rec("sets", "dense", 18.0, partitions=364, ops=get(0.15), params={"encoding": "set"}),
    rec("sets", "flat P=1", 86.0, layout="flat", partitions=1),
    rec("sets", "hash P=256", 34.0, layout="hash", partitions=256),
    rec("sets", "bloom p=0.01 (module-free)", 1.2, layout="bloom"),
    rec("sets", "bloom p=1e-06 (module-free)", 3.6, layout="bloom"),
    rec("maps", "int_holey · plain SET", 71.0, layout="plain", params={"case": "int_holey"}, ops=get(0.1)),
    rec("maps", "int_holey · map int", 11.6, layout="map", params={"case": "int_holey", "codec_name": "int"}),
    rec("maps", "json · plain SET", 212.0, layout="plain", params={"case": "json"}),
    rec("maps", "json · map raw", 217.0, layout="map", params={"case": "json", "codec_name": "raw"}),
    rec("maps", "json · map zstd+dict", 52.0, layout="map", params={"case": "json", "codec_name": "zstd+dict"}),
    small("hash", "default", 512, {512: 28.1, 2089: 57.0}),
    small("set", "default", 128, {512: 65.8}),
    small("hash", "raised", 2048, {2048: 28.0}),
]


def doc(runs: list[RunRecord] = RUNS) -> dict[str, Any]:
    return build_document(command="densekv lab", n=100_000, servers=[STAMP], experiments=[], runs=runs)


def test_each_kind_says_what_to_do_with_its_measured_saving() -> None:
    rows = {(a.kind, a.what.split(" (")[0]): a for a in advice(doc())}
    sessions = rows[("sessions", "sessions")]
    assert (sessions.plain_bytes, sessions.chosen_bytes) == (130.0, 26.0)
    assert sessions.saving == pytest.approx(0.8) and "SessionStore(" in sessions.call
    assert sessions.gib_per_100m == pytest.approx(104 * 1e8 / 2**30)
    assert (sessions.plain_usec, sessions.chosen_usec) == (0.4, 0.35)
    sets = rows[("sets", "a set of 16-byte IDs")]
    assert sets.plain == "one SET holding every ID (SADD)" and sets.chosen_bytes == 18.0
    assert "BloomFilter" in sets.todo and "1.20 B per ID" in sets.todo
    json_row = rows[("maps", "JSON objects of 80-200 bytes")]  # the best map, not the first
    assert json_row.chosen_bytes == 52.0 and ".train(" in json_row.call
    assert rows[("small_sets", "a small set of 512 24-byte members")].saving == pytest.approx(1 - 28.1 / 65.8)
    config = rows[("small_sets", "a HASH of 2,048 entries")]
    assert config.call == "CONFIG SET hash-max-listpack-entries 2048" and config.plain_bytes == 57.0
    assert len(headline(doc())) == len(advice(doc()))


def test_a_comparison_missing_one_side_gives_no_row() -> None:
    partial = [r for r in RUNS if r.variant != "json" and r.kind != "maps"]
    kinds = {a.kind for a in advice(doc(partial))}
    assert "sessions" not in kinds and "maps" not in kinds and "sets" in kinds


@pytest.mark.parametrize("seed_1m,word", [(39.0, "confirmed"), (20.0, "confirmed, and more"), (80.0, "differs")])
def test_the_seed_000_verdict(seed_1m: float, word: str) -> None:
    runs = [r for r in RUNS if r.variant != "zset seed 1M"] + [
        rec("sessions", "zset seed 1M", seed_1m, layout="zset", partitions=2048)]
    v = next(v for v in verdicts(doc(runs)) if v.seed == "000")
    assert v.word == word and v.sentence.startswith("Seed 000 claims that partitioned HASH + ZSET")
    assert ("would be" in v.sentence) == (word == "differs")  # a difference says what the claim needed


def test_every_seed_gets_its_verdict() -> None:
    found = {(v.seed, v.word) for v in verdicts(doc())}
    assert ("002", "confirmed") in found  # 28.1 vs 65.8: 57% against the seed's 56%
    assert ("004", "differs") in found  # 71 / 11.6 = 6.1 times, the seed said 10
    assert {s for s, _ in found} == {"000", "001", "002", "004"}
