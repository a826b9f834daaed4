"""The set kinds' pure projections of the probe's Capabilities (sets/compact.py limits_of,
sets/bloom_spec.py facts_of), fed canned servers as tables: what the probe flow reads is
what every set, family and Bloom filter decides from, sync or asyncio. Redis 6.2 knows
only the ziplist config names: its limits are read from them (the asyncio sets used to
read the listpack names and fall back to the defaults there)."""

from __future__ import annotations

import pytest

from densekv.capabilities import probe_flow
from densekv.flows import drive
from densekv.sets.bloom_math import EXACT, JEMALLOC, LIBC
from densekv.sets.bloom_spec import BloomFacts, Request, facts_of, spec_for
from densekv.sets.compact import limits_of
from densekv.sets.family import choose_encoding
from densekv.sets.layouts import SetLimits
from tests.unit.canned import Canned
from tests.unit.test_probe_flow import NO_CONFIG, REDIS_62, REDIS_74, VALKEY_91, Server

CASES = [  # server -> (SetLimits, BloomFacts, a family's encoding for 100 children, a filter's rounding)
    (REDIS_62, SetLimits(512, 80, None, None, 256, 72, "jemalloc", False), BloomFacts("jemalloc-5.3.0", ()),
     "hash", JEMALLOC),
    (REDIS_74, SetLimits(128, 64, 128, 64, 128, 64, "jemalloc", False), BloomFacts("jemalloc-5.3.0", ("bf",)),
     "set", JEMALLOC),
    (VALKEY_91, SetLimits(128, 64, None, None, 128, 64, "libc", True), BloomFacts("libc", ()), "hash", LIBC),
    (NO_CONFIG, SetLimits(128, 64, None, None, 128, 64, "jemalloc", False), BloomFacts("jemalloc-5.3.0", ("search",)),
     "hash", JEMALLOC),
]


@pytest.mark.parametrize(("server", "limits", "bloom", "family", "rule"), CASES,
                         ids=["redis-6.2", "redis-7.4", "valkey-9.1", "no-config"])
def test_sets_decide_from_the_probe(server: Server, limits: SetLimits, bloom: BloomFacts, family: str,
                                    rule: str) -> None:
    caps = drive(probe_flow(), Canned(server.answer))
    assert limits_of(caps) == limits
    assert facts_of(caps) == bloom
    assert bloom.has_bloom_module is (server is REDIS_74)
    assert choose_encoding(limits_of(caps), 100).encoding == family
    assert spec_for(Request(10_000, 0.01, False), facts_of(caps)).rule == rule
    assert spec_for(Request(10_000, 0.01, True), facts_of(caps)).rule == EXACT
