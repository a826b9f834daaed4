"""FamilyCore's flows (densekv/sets/family.py) against scripted replies, no server: one row
per case (encoding, operation, scripted round trips with what each step must carry, result
or error), h11's table style. A family keeps one key per parent, `f:fm:{<parent>}` (a HASH
child -> 1, or a SET), and lists parents that left the compact encoding in `f:fo:{0}`.

A family has no compare-and-set (each add or discard is one atomic script), so its
"conflict" rows are the scripts' WRONGTYPE answers; NOSCRIPT is the executors'
(densekv/executors.py). Behaviour against real servers: tests/behaviour/test_set_family.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
import redis

from densekv.errors import BadItem, ScriptError, WrongType
from densekv.flows import Flow
from densekv.sets.family import FamilyChoice, FamilyCore, choose_encoding
from densekv.sets.layouts import SetLimits
from tests.unit.scripted import Raises, check

LIMITS = SetLimits(512, 64, 128, 64)
HASH = FamilyCore("f", None, FamilyChoice("hash", 512, "asked for"), LIMITS)
SET = FamilyCore("f", 60, FamilyChoice("set", 128, "asked for"), LIMITS)
INTS = FamilyCore("f", None, FamilyChoice("hash", 512, "asked for"), LIMITS, children=int)
KEY, OUTLIERS = b"f:fm:{p1}", b"f:fo:{0}"
WRONG = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")


def add(child: bytes, encoding: str, ttl_ms: int, reply: Any) -> tuple[Any, Any]:
    """set_family_add: KEYS the parent; ARGV the child, the encoding, the expiry in ms.
    Reply: added, children now, the key's encoding."""
    return ("set_family_add", (KEY,), child, encoding, ttl_ms), reply


class Case(NamedTuple):
    id: str
    core: FamilyCore
    op: Callable[[FamilyCore], Flow[Any]]
    script: list[list[tuple[Any, Any]]]
    expect: Any


CASES = [
    Case("add-new", HASH, lambda c: c.add("p1", "c1"), [[add(b"c1", "hash", 0, [1, 1, b"listpack"])]], True),
    Case("add-there", HASH, lambda c: c.add("p1", b"c1"), [[add(b"c1", "hash", 0, [0, 1, b"listpack"])]], False),
    Case("add-set-with-ttl", SET, lambda c: c.add("p1", 7), [[add(b"7", "set", 60_000, [1, 3, b"listpack"])]], True),
    Case("add-int-parent", HASH, lambda c: c.add(12, "c"), [[(("set_family_add", (b"f:fm:{12}",)), [1, 1, b"listpack"])]],
         True),
    Case("add-converted-is-listed", HASH, lambda c: c.add("p1", "c1"),  # left the listpack: one SADD to the outliers
         [[add(b"c1", "hash", 0, [1, 513, b"hashtable"])], [(("SADD", OUTLIERS, b"p1"), 1)]], True),
    Case("add-wrong-type", HASH, lambda c: c.add("p1", "c1"), [[add(b"c1", "hash", 0, WRONG)]],
         Raises(WrongType, KEY.decode())),
    Case("add-script-failed", HASH, lambda c: c.add("p1", "c1"), [[add(b"c1", "hash", 0, redis.ResponseError("ERR oom"))]],
         Raises(ScriptError, "set_family_add")),
    Case("add-many", SET, lambda c: c.add_many("p1", ["a", "b"]),  # one round trip, a script call per child
         [[add(b"a", "set", 60_000, [1, 1, b"listpack"]), add(b"b", "set", 60_000, [0, 1, b"listpack"])]],
         [True, False]),
    Case("add-many-empty", HASH, lambda c: c.add_many("p1", []), [], []),
    Case("add-many-one-bad-child", HASH, lambda c: c.add_many("p1", ["a", 1.5]), [], Raises(BadItem)),
    Case("add-bool-child", HASH, lambda c: c.add("p1", True), [], Raises(BadItem)),
    Case("add-bool-parent", HASH, lambda c: c.add(False, "c"), [], Raises(BadItem)),
    Case("add-not-decimal-to-int-family", INTS, lambda c: c.add("p1", "01"), [], Raises(BadItem, "decimal")),
    Case("add-lone-surrogate", HASH, lambda c: c.add("p1", "\ud800"), [], Raises(BadItem, "surrogate")),
    Case("contains-hash", HASH, lambda c: c.contains("p1", "c1"), [[(("HEXISTS", KEY, b"c1"), 1)]], True),
    Case("contains-set", SET, lambda c: c.contains("p1", "c1"), [[(("SISMEMBER", KEY, b"c1"), 0)]], False),
    Case("contains-wrong-type", SET, lambda c: c.contains("p1", "c1"), [[("SISMEMBER", WRONG)]], Raises(WrongType)),
    Case("remove-hash", HASH, lambda c: c.remove("p1", "c1"), [[(("HDEL", KEY, b"c1"), 1)]], True),
    Case("remove-set", SET, lambda c: c.remove("p1", "c1"), [[(("SREM", KEY, b"c1"), 0)]], False),
    Case("count", HASH, lambda c: c.count("p1"), [[(("HLEN", KEY), 3)]], 3),
    Case("members-two-scan-steps", INTS, lambda c: c.members("p1"),
         [[(("HSCAN", KEY, 0), [b"7", [b"1", b"1", b"22", b"1"]])], [(("HSCAN", KEY, 7), [b"0", [b"1", b"1"]])]],
         {1, 22}),
    Case("members-set", SET, lambda c: c.members("p1"), [[(("SSCAN", KEY, 0), [b"0", [b"a", b"b"]])]], {b"a", b"b"}),
    # discard: one script (type-checked UNLINK), then the parent leaves the outlier list
    Case("discard", HASH, lambda c: c.discard_parent("p1"),
         [[(("set_family_discard", (KEY,), "hash"), 1)], [(("SREM", OUTLIERS, b"p1"), 0)]], True),
    Case("discard-missing", SET, lambda c: c.discard_parent("p1"),
         [[(("set_family_discard", (KEY,), "set"), 0)], [("SREM", 0)]], False),
    Case("discard-wrong-type", HASH, lambda c: c.discard_parent("p1"), [[("set_family_discard", WRONG)]],
         Raises(WrongType)),
    Case("expire", HASH, lambda c: c.expire("p1", 1.5), [[(("PEXPIRE", KEY, 1500), 1)]], True),
    Case("expire-zero", HASH, lambda c: c.expire("p1", 0), [], Raises(ValueError)),
    Case("ttl", HASH, lambda c: c.ttl("p1"), [[(("PTTL", KEY), 2500)]], 2.5),
    Case("ttl-none", HASH, lambda c: c.ttl("p1"), [[(("PTTL", KEY), -1)]], None),
    Case("ttl-missing", HASH, lambda c: c.ttl("p1"), [[(("PTTL", KEY), -2)]], None),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_family_flows(case: Case) -> None:
    check(case.op(case.core), case.script, case.expect)


def test_stats_read_the_outliers_and_forget_parents_gone_since() -> None:
    script = [
        [(("SSCAN", OUTLIERS, 0, "COUNT", 100), [b"0", [b"p1", b"p2", b"p1"]])],  # SSCAN may repeat
        [(("HLEN", b"f:fm:{p1}"), 600), (("HLEN", b"f:fm:{p2}"), 0),
         (("OBJECT", "ENCODING", b"f:fm:{p1}"), b"hashtable"), (("OBJECT", "ENCODING", b"f:fm:{p2}"), None)],
        [(("SREM", OUTLIERS, b"p2"), 1)],
    ]
    stats = check(HASH.stats(), script).result
    assert stats["outliers"] == [{"parent": "p1", "children": 600, "encoding": "hashtable"}]
    assert "1 parent(s) outgrew the hash listpack (limit 512" in stats["warnings"][0]


def test_stats_of_a_family_without_outliers_is_one_round_trip() -> None:
    stats = check(SET.stats(), [[("SSCAN", [b"0", []])]]).result
    assert stats["outliers"] == [] and stats["warnings"] == [] and stats["ttl"] == 60


@pytest.mark.parametrize(("limits", "expected", "encoding", "want"), [
    (SetLimits(512, 64, None), 10, "auto", "hash"),  # no listpack sets (Redis < 7.2)
    (LIMITS, 128, "auto", "set"),  # parents stay within set-max-listpack-entries
    (LIMITS, 129, "auto", "hash"),  # one past it
    (LIMITS, None, "auto", "hash"),
    (LIMITS, 1000, "set", "set"),
], ids=["no-listpack-sets", "at-set-limit", "past-set-limit", "unknown", "asked"])
def test_choose_encoding(limits: SetLimits, expected: int | None, encoding: str, want: str) -> None:
    assert choose_encoding(limits, expected, encoding).encoding == want


@pytest.mark.parametrize("args", [("", None), ("a{b", None), ("f", 0), ("f", -1.0)], ids=repr)
def test_a_core_refuses_bad_arguments(args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        FamilyCore(*args, FamilyChoice("hash", 512, ""), LIMITS)
