"""The planner's cluster spread (densekv/tools/planner/cluster.py): partitions and bytes per
master and the imbalance, checked against slots counted independently from the key names
the layouts themselves write."""

from __future__ import annotations

import subprocess
import sys

import pytest
from redis.crc import key_slot

from densekv.errors import PlannerError
from densekv.keys import tag
from densekv.maps.buckets import Geometry, locate
from densekv.sets.layouts import DenseSet
from densekv.tools.planner import plan
from densekv.tools.planner.cluster import TARGET, imbalance, partitions_under, spread
from densekv.tools.server.cluster import slot_ranges


def _session_key(p: int) -> bytes:
    return tag("plan", "sd", p)  # the dense layout's partition hash (base partitions = partitions)


def _set_key(p: int, partitions: int) -> bytes:
    return DenseSet("plan", partitions, 16).key(p)


def _map_key(p: int, partitions: int) -> bytes:
    return locate("plan", f"item:{p}", Geometry(partitions, 128, 64)).bucket  # item:p is in bucket p


def _by_hand(keys: list[bytes], masters: int) -> list[int]:
    """Keys per master: key_slot of each key name, looked up in the even split's ranges."""
    out = [0] * masters
    for k in keys:
        s = key_slot(k)
        out[next(i for i, (a, b) in enumerate(slot_ranges(masters)) if a <= s <= b)] += 1
    return out


@pytest.mark.parametrize(("kind", "partitions", "masters"), [
    ("sessions", 64, 3), ("sessions", 4096, 3), ("sessions", 1024, 6),
    ("set", 300, 3), ("set", 2048, 5), ("map", 1000, 3), ("map", 97, 4),
])
def test_spread_matches_slots_counted_from_the_key_names(kind: str, partitions: int, masters: int) -> None:
    name = {"sessions": lambda p: _session_key(p), "set": lambda p: _set_key(p, partitions),
            "map": lambda p: _map_key(p, partitions)}[kind]
    expected = _by_hand([name(p) for p in range(partitions)], masters)
    got = spread(kind, partitions, 1_000_000, masters=masters)
    assert got.partitions_per_master == expected
    assert got.imbalance == round(max(expected) * masters / partitions, 4)
    assert got.bytes_per_master == [round(1_000_000 * n / partitions) for n in expected]
    assert got.masters == masters and got.slot_source == "even split"


def test_a_known_small_set_over_three_masters() -> None:
    # 8 session partitions: slots of "{0}".."{7}" counted here on the ranges 0-5461, 5462-10922, 10923-16383
    slots = [key_slot(b"{%d}" % p) for p in range(8)]
    expected = [sum(1 for s in slots if s <= 5461), sum(1 for s in slots if 5462 <= s <= 10922),
                sum(1 for s in slots if s >= 10923)]
    got = spread("sessions", 8, 800.0, masters=3)
    assert got.partitions_per_master == expected and sum(expected) == 8
    assert got.imbalance == round(max(expected) * 3 / 8, 4)


@pytest.mark.parametrize("masters", [3, 6])
def test_more_partitions_lower_the_imbalance(masters: int) -> None:
    ratios = [spread("sessions", p, 1.0, masters=masters).imbalance for p in (8, 64, 1024, 65536)]
    assert ratios[0] > ratios[1] > ratios[3] and ratios[2] > ratios[3]
    assert ratios[3] < 1.02


def test_advice_names_a_count_that_brings_the_imbalance_under_the_target() -> None:
    got = spread("sessions", 16, 1.0, masters=3)
    assert got.imbalance > 1.10
    assert got.better_partitions is not None and str(got.better_partitions) in got.advice
    assert spread("sessions", got.better_partitions, 1.0, masters=3).imbalance <= TARGET
    assert spread("sessions", got.better_partitions // 2, 1.0, masters=3).imbalance > TARGET  # the smallest
    assert partitions_under("sessions", [[r] for r in slot_ranges(3)], 16) == got.better_partitions
    even = spread("sessions", 65536, 1.0, masters=3)
    assert even.better_partitions is None and even.advice == ""


@pytest.mark.parametrize(("kind", "partitions"), [("sessions", 1), ("sessions", 4096), ("set", 77), ("map", 5)])
def test_one_master_is_perfectly_even(kind: str, partitions: int) -> None:
    got = spread(kind, partitions, 1234.0, masters=1)
    assert got.imbalance == 1.0 and got.partitions_per_master == [partitions]
    assert got.bytes_per_master == [1234] and got.advice == ""


def test_explicit_slot_ranges_win_over_an_even_split() -> None:
    # one master owns two ranges, the other the rest: as CLUSTER SLOTS may say after a migration
    ranges = [[(0, 99), (8000, 16383)], [(100, 7999)]]
    slots = [key_slot(b"{%d}" % p) for p in range(512)]
    first = sum(1 for s in slots if s <= 99 or s >= 8000)
    got = spread("sessions", 512, 512.0, ranges=ranges, source="CLUSTER SLOTS of x")
    assert got.partitions_per_master == [first, 512 - first] and got.masters == 2
    assert got.slot_source == "CLUSTER SLOTS of x"


@pytest.mark.parametrize("ranges", [
    [[(0, 100)], [(200, 16383)]],  # slots 101-199 have no master
    [[(0, 8000)], [(8000, 16383)]],  # slot 8000 has two
    [[(0, 16384)]],  # past the last slot
    [],
])
def test_slot_ranges_must_cover_every_slot_once(ranges: list[list[tuple[int, int]]]) -> None:
    with pytest.raises(PlannerError):
        spread("sessions", 64, 1.0, ranges=ranges)


@pytest.mark.parametrize("masters", [0, -1, 16385, True, 2.5, "3"])
def test_bad_master_counts_raise_a_planner_error(masters: object) -> None:
    with pytest.raises(PlannerError, match="masters"):
        spread("sessions", 64, 1.0, masters=masters)  # type: ignore[arg-type]
    with pytest.raises(PlannerError, match="masters"):  # before any server is touched
        plan("sessions", 1000, masters=masters, url="redis://127.0.0.1:1/0")  # type: ignore[arg-type]


def test_imbalance_needs_partitions() -> None:
    with pytest.raises(PlannerError):
        imbalance([0, 0, 0])


@pytest.mark.parametrize("value", ["0", "-2", "16385", "three"])
def test_cli_refuses_bad_master_counts_with_exit_2(value: str) -> None:
    done = subprocess.run([sys.executable, "-m", "densekv.tools.planner", "--kind", "sessions", "--items", "1000",
                           "--masters", value], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--masters" in done.stderr and done.stderr.count("\n") == 1, done.stderr
