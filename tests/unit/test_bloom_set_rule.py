"""How bloom_add.lua sets bits on each server (bloom_spec.set_rule): SETBIT on Redis 7.4
and later, BITFIELD elsewhere, decided from the probe's Capabilities (canned servers, no
socket) and sent to the script as ARGV[4] for calls of BITFIELD_MIN_ITEMS items or more. The bits are the same either way
(tests/behaviour/test_bloom.py checks every byte in both modes)."""

from __future__ import annotations

import pytest

from densekv.capabilities import probe_flow
from densekv.flows import drive
from densekv.sets.bloom_core import BloomCore
from densekv.sets.bloom_math import BloomSpec
from densekv.sets.bloom_spec import (
    SET_BITFIELD,
    SET_SETBIT,
    BloomFacts,
    Request,
    facts_of,
    set_rule,
)
from tests.unit.canned import Canned
from tests.unit.test_probe_flow import NO_CONFIG, REDIS_62, REDIS_74, VALKEY_91, Server


@pytest.mark.parametrize(("flavor", "version", "rule"), [
    ("redis", (7, 4, 1), SET_SETBIT),
    ("redis", (8, 0, 0), SET_SETBIT),
    ("redis", (7, 2, 4), SET_BITFIELD),
    ("redis", (7, 0, 15), SET_BITFIELD),
    ("valkey", (8, 0, 1), SET_BITFIELD),
    ("valkey", (9, 1, 2), SET_BITFIELD),
])
def test_set_rule(flavor: str, version: tuple[int, ...], rule: str) -> None:
    assert set_rule(flavor, version) == rule


@pytest.mark.parametrize(("server", "rule"), [(REDIS_62, SET_BITFIELD), (REDIS_74, SET_SETBIT),
                                              (VALKEY_91, SET_BITFIELD), (NO_CONFIG, SET_BITFIELD)],
                         ids=["redis-6.2", "redis-7.4", "valkey-9.1", "no-config"])
def test_the_probe_decides_and_the_add_plan_says_it(server: Server, rule: str) -> None:
    facts = facts_of(drive(probe_flow(), Canned(server.answer)))
    assert facts.set_bits == rule
    core = BloomCore("f", Request(1000, 0.01, False))
    core.spec, core.set_bits = BloomSpec(1000, 0.01, 1), facts.set_bits  # what open() keeps of the facts
    batch = core._plan_add(0, core._stage_list(1), b"\0" * 8 * 140, 140)
    assert batch.steps[0].args[3] == (1 if rule == SET_BITFIELD else 0)  # bloom_add.lua's ARGV[4]
    single = core._plan_add(0, core._stage_list(1), b"\0" * 8, 1)
    assert single.steps[0].args[3] == 0  # SETBIT for a call of fewer than BITFIELD_MIN_ITEMS


def test_the_rule_is_not_part_of_what_facts_compare() -> None:
    """Two clients on different servers open the same filter: the rule changes no bit."""
    assert BloomFacts("libc", (), SET_SETBIT) == BloomFacts("libc", (), SET_BITFIELD)
