"""The lab's data: fixed seeds, the shapes each seed used, streams with bounded memory."""

from __future__ import annotations

import json
import tracemalloc
from itertools import islice

import pytest

from densekv.tools.lab.workloads import (
    WORKLOADS,
    Stream,
    chunks,
    identities,
    ids16,
    json_objects,
    words24,
)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_same_seed_same_items_other_seed_other_items(name: str) -> None:
    w = WORKLOADS[name]
    assert list(w.items(50, seed=1)) == list(w.items(50, seed=1))
    assert list(w.items(50, seed=1)) != list(w.items(50, seed=2))
    assert len(list(w.items(50))) == 50


def test_shapes() -> None:
    assert all(isinstance(x, bytes) and len(x) == 16 for x in ids16(100))
    assert all(len(x) == 24 and x.isalpha() and x.islower() for x in words24(100))
    assert all(0 <= x < 50 for x in identities(100))
    docs = [json.loads(x) for x in json_objects(100)]
    assert {tuple(sorted(d)) for d in docs} == {("active", "city", "email", "id", "name", "score", "tags")}
    assert all(200 <= len(x) for x in WORKLOADS["html"].items(20))
    assert all(len(x) == 8 for x in WORKLOADS["strings8"].items(20))


def test_the_first_items_do_not_depend_on_n() -> None:
    # a 10M run and a 1k run load the same first items
    assert list(islice(ids16(10_000_000), 100)) == list(ids16(100))


def test_a_stream_continues_where_it_stopped() -> None:
    s = Stream(words24(10))
    assert s.take(4) + s.take(4) + s.take(4) == list(words24(10))
    assert s.taken == 10


def test_streaming_ten_million_costs_bounded_memory() -> None:
    tracemalloc.start()
    try:
        gen = ids16(10_000_000)
        for chunk in islice(chunks(gen, 2000), 100):  # 200k items pulled in chunks
            assert len(chunk) == 2000
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, peak  # two chunks' worth, not 10M items


def test_chunks_and_bad_input() -> None:
    assert [len(c) for c in chunks(range(5), 2)] == [2, 2, 1]
    with pytest.raises(ValueError):
        list(chunks(range(5), 0))
    with pytest.raises(ValueError):
        WORKLOADS["ints"].items(-1)
