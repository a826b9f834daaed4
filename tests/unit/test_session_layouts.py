"""The registry of session layouts (densekv/sessions/meta.py SPECS) and what a layout
declares instead of its class: every layout the registry holds is built, placed, sized and
offered by the planner and the lab from its entry alone, and the store's flows never ask
which class a layout is. Pure: plans are built and inspected, nothing is sent.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest

from densekv.capabilities import Capabilities
from densekv.errors import LayoutUnavailable
from densekv.keys import partition_count
from densekv.listpack import entry_size
from densekv.sessions import meta
from densekv.sessions.layouts.base import Layout
from densekv.sessions.layouts.partitioned import DenseLayout
from densekv.sessions.meta import (
    LAYOUTS,
    SPECS,
    LayoutLimits,
    LayoutSpec,
    ServerFacts,
    StoreMeta,
    make_layout,
    spec_of,
)
from densekv.sessions.model import Record
from densekv.sessions.record import pack_record
from densekv.tools.lab.experiments.sessions import plan_variants
from densekv.tools.planner.kinds import SessionsPlanner, Workload

ROOT = Path(__file__).resolve().parents[2]
LIMITS = LayoutLimits(hash_max_listpack_entries=128, hash_max_listpack_value=64, zset_max_listpack_entries=32)
WITH_TTL = ServerFacts(LIMITS, "hsetex", "hashtable")
WITHOUT_TTL = ServerFacts(LIMITS, "none")
NOW = 1_800_000_000


def build(spec: LayoutSpec, facts: ServerFacts = WITH_TTL, expected: int = 10_000,
          partitions: int | None = None, store_meta: StoreMeta | None = None) -> Layout:
    return make_layout(spec.name, "ns", facts, expected, partitions, store_meta)


def record(payload: bytes | None, identity: int | str = 1234) -> Record:
    return Record(bytes(range(16)), identity, NOW + 600, NOW + 600, payload=payload)


def test_the_registry_names_every_layout_once_and_builds_its_class() -> None:
    assert LAYOUTS == tuple(s.name for s in SPECS) and len(set(LAYOUTS)) == len(LAYOUTS)
    for spec in SPECS:
        layout = build(spec)
        assert type(layout) is spec.cls and layout.name == spec.name
        assert spec_of(spec.name) is spec
    with pytest.raises(ValueError, match="choose one of auto, " + ", ".join(LAYOUTS)):
        spec_of("nope")


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_layout_runs_only_where_the_server_has_what_it_needs(spec: LayoutSpec) -> None:
    if not spec.needs:
        assert spec.unavailable(WITHOUT_TTL) is None
        assert build(spec, WITHOUT_TTL).name == spec.name
        return
    why = spec.unavailable(WITHOUT_TTL)
    assert why is not None and why.startswith(f"layout {spec.name} needs ")
    with pytest.raises(LayoutUnavailable, match=re.escape(why)):
        build(spec, WITHOUT_TTL)
    assert spec.unavailable(WITH_TTL) is None


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_partition_count_follows_the_spec_limit(spec: LayoutSpec) -> None:
    layout = build(spec, expected=100_000)
    limit = spec.partition_limit(LIMITS)
    if limit is None:
        assert layout.partitions == 0 and layout.partitioning() is None
        return
    assert limit <= LIMITS.hash_max_listpack_entries
    assert layout.partitions == partition_count(100_000, limit)
    assert build(spec, partitions=64).partitions == 64


def test_the_zset_layout_is_bounded_by_the_zset_listpack_limit_and_dense_is_not() -> None:
    assert spec_of("zset").partition_limit(LIMITS) == LIMITS.zset_max_listpack_entries
    # a split session takes two hash entries (its record and its continuation field)
    assert spec_of("dense").partition_limit(LIMITS) == LIMITS.hash_max_listpack_entries // 2
    assert build(spec_of("zset"), expected=100_000).partitions > build(spec_of("dense"), expected=100_000).partitions


def placed(layout: Layout, rec: Record) -> str:
    """Where plan_put put the payload, read from the commands it builds."""
    steps = layout.plan_put(rec, NOW).steps
    names = [(step.args[0], step.args[1]) for step in steps]
    if any(cmd == "SET" and b":so:" in k for cmd, k in names):
        return "out of line"
    if any(step.args[0] == "HSET" and (b":sc:" in step.args[1] or len(step.args) == 6) for step in steps):
        return "split"  # the continuation field beside the record (or 0.1's continuation hash)
    return "inline"


@pytest.mark.parametrize("spec", [s for s in SPECS if s.partitioned], ids=lambda s: s.name)
def test_the_spec_placement_rule_is_what_the_layout_writes(spec: LayoutSpec) -> None:
    layout = build(spec)
    seen = set()
    for identity in (7, "someone@example.org"):
        bare = len(pack_record(record(b"", identity), b""))
        for n in range(1, 3 * LIMITS.hash_max_listpack_value):
            rec = record(b"\x01" + b"p" * (n - 1), identity)
            full = len(pack_record(rec, rec.payload))
            where = spec.placement(full, bare, LIMITS.hash_max_listpack_value)
            assert where == placed(layout, rec), (identity, n)
            seen.add(where)
    assert {"inline", "out of line"} <= seen
    assert ("split" in seen) == spec.cls.splits


def test_one_key_per_session_layouts_place_nothing() -> None:
    for spec in SPECS:
        if not spec.partitioned:
            assert spec.placement(500, 10, 64) is None


@pytest.mark.parametrize("spec", [s for s in SPECS if s.entry_bytes is not None], ids=lambda s: s.name)
def test_the_bytes_formula_counts_the_listpack_entries_the_put_writes(spec: LayoutSpec) -> None:
    assert spec.entry_bytes is not None
    layout = build(spec)
    for identity, payload in ((7, None), (2**40, b"\x01" + b"x" * 20), ("a@b.example", b"\x01" + b"y" * 40)):
        rec = record(payload, identity)
        written = 0
        field = value = b""
        for step in layout.plan_put(rec, NOW).steps:
            args = step.args
            if args[0] == "HSET":
                field, value = args[2], args[3]
                written += entry_size(field) + entry_size(value)
            elif args[0] == "ZADD":
                written += entry_size(args[3]) + entry_size(str(args[2]).encode())
        assert field and written == spec.entry_bytes(len(field), len(value), rec.expires_at)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_what_a_layout_declares_agrees_with_itself(spec: LayoutSpec) -> None:
    layout = build(spec)
    parts = layout.partitioning()
    assert (parts is not None) == spec.partitioned == bool(layout.partitions)
    assert (layout.count_match() is None) == spec.partitioned
    assert layout.from_partitions is None and layout.plan_splits([bytes(16)]) == []
    assert layout.plan_unit_splits(range(4)) == []
    rec = replace(record(None), outside=True)
    if layout.outside:
        assert layout.plan_fetch_outside(rec).steps
        assert len(layout.plan_drop_outside([rec])) == 1
    else:
        assert layout.plan_drop_outside([rec]) == []
        with pytest.raises(NotImplementedError):
            layout.plan_fetch_outside(rec)
    if parts is not None:
        assert "hash" in parts.structures(0) and ("zset" in parts.structures(0)) == (spec.name == "zset")


def glob_matches(pattern: bytes, key: bytes) -> bool:
    """Redis glob (`*`, `?`, backslash escapes) as a regex."""
    out, i = b"", 0
    while i < len(pattern):
        c = pattern[i : i + 1]
        if c == b"\\":
            out += re.escape(pattern[i + 1 : i + 2])
            i += 2
            continue
        out += b".*" if c == b"*" else b"." if c == b"?" else re.escape(c)
        i += 1
    return re.fullmatch(out, key, re.DOTALL) is not None


@pytest.mark.parametrize("spec", [s for s in SPECS if not s.partitioned], ids=lambda s: s.name)
def test_the_count_pattern_matches_the_layout_keys_and_no_other_namespace(spec: LayoutSpec) -> None:
    for namespace in ("app", "a*b?[c]"):
        layout = make_layout(spec.name, namespace, WITH_TTL, 10, None)
        other = make_layout(spec.name, namespace + "x", WITH_TTL, 10, None)
        match = layout.count_match()
        assert match is not None
        digest = bytes(range(16))
        assert glob_matches(match, layout.key(digest))  # type: ignore[attr-defined]
        assert not glob_matches(match, other.key(digest))  # type: ignore[attr-defined]


def test_a_repartition_splits_each_old_partition_once_before_its_digests() -> None:
    for spec in (s for s in SPECS if s.partitioned):
        layout = build(spec, store_meta=StoreMeta(spec.name, 16, 4, 4))
        assert layout.from_partitions == 4 and layout.partitions == 16
        digests = [bytes([top]) + bytes(15) for top in (0x00, 0x10, 0x40, 0x41, 0xF0)]  # old partitions 0, 0, 1, 1, 3
        assert len(layout.plan_splits(digests)) == 3
        assert len(layout.plan_unit_splits(range(16))) == 4


def test_a_new_layout_is_one_registry_entry_for_the_store_planner_and_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    class Denser(DenseLayout):
        name = "denser"

    entry = LayoutSpec("denser", Denser, "a test layout", sized_by=("hash", "zset"))
    monkeypatch.setattr(meta, "SPECS", (*SPECS, entry))
    layout = make_layout("denser", "ns", WITH_TTL, 100_000, None)
    assert isinstance(layout, Denser) and layout.partitions == partition_count(100_000, LIMITS.zset_max_listpack_entries)
    assert StoreMeta.from_reply([b"layout", b"denser", b"partitions", b"8", b"base", b"8"]) is not None
    planner = SessionsPlanner()
    assert "denser" in planner.layouts
    caps = Capabilities("valkey", "9.1.0", "libc", 128, 64, 64, 64, 128, 64, 512, "hsetex", "hashtable", (),
                        False, 0, "noeviction", False)
    cands = planner.candidates(Workload("sessions", 100_000), caps)
    assert [c.partitions for c in cands if c.layout == "denser"] == [partition_count(100_000, 64)]
    variants, _ = plan_variants(100_000, True, 128, 128)
    assert "denser" in [v.layout for v in variants]
    with pytest.raises(ValueError, match="unknown capabilities or structures"):
        LayoutSpec("odd", Denser, "a structure the server has no limit for", sized_by=("list",))


def test_the_planner_and_the_lab_offer_what_the_server_can_run() -> None:
    caps = Capabilities("redis", "7.0.0", "libc", 128, 64, 128, 64, 128, 64, 512, "none", None, (),
                        False, 0, "noeviction", False)
    offered = {c.layout for c in SessionsPlanner().candidates(Workload("sessions", 10_000), caps)}
    assert offered == {s.name for s in SPECS if not s.baseline and not s.needs}
    variants, notes = plan_variants(10_000, False, 128, 128)
    assert {v.layout for v in variants} == {s.name for s in SPECS if not s.needs}
    assert [n.split(":")[0] for n in notes] == [s.name for s in SPECS if s.needs]


#: the store's flows, the lab and the planner: none asks which class a layout is
FLOW_MODULES = ("densekv/sessions/core.py", "densekv/sessions/sweep.py", "densekv/sessions/payload_flows.py",
                "densekv/sessions/identities.py", "densekv/sessions/rotations.py", "densekv/sessions/store.py",
                "densekv/tools/lab/experiments/sessions.py", "densekv/tools/planner/kinds.py")


def test_no_flow_asks_which_class_a_layout_is() -> None:
    classes = {c.__name__ for s in SPECS for c in s.cls.__mro__ if issubclass(c, Layout) and c is not Layout}
    for path in FLOW_MODULES:
        tree = ast.parse((ROOT / path).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                assert not named & classes, f"{path}:{node.lineno} isinstance on {named & classes}"
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("densekv.sessions.layouts.partitioned",
                                                   "densekv.sessions.layouts.perkey")), f"{path}:{node.lineno}"


def test_a_new_store_and_the_planner_size_partitions_by_the_same_fill() -> None:
    """On a server's default hash-max-listpack-entries (512: 256 sessions of two entries a
    partition) the entry limit alone allows ~200 sessions a partition; the fill default caps
    the mean at 64 (issue 30: shorter listpack scans), fill=None keeps the densest count,
    and the planner prices the count a store would make."""
    limits = LayoutLimits(hash_max_listpack_entries=512, hash_max_listpack_value=64, zset_max_listpack_entries=128)
    facts = ServerFacts(limits, "hsetex", "hashtable")
    made = make_layout("dense", "ns", facts, 100_000, None)
    densest = make_layout("dense", "ns", facts, 100_000, None, fill=None)
    assert densest.partitions == partition_count(100_000, 256) == 512
    assert made.partitions == partition_count(100_000, 256, fill=meta.DEFAULT_FILL) == 2048
    assert 100_000 / made.partitions <= meta.DEFAULT_FILL < 100_000 / densest.partitions
    caps = Capabilities("valkey", "9.1.0", "libc", 512, 64, 128, 64, 128, 64, 512, "hsetex", "hashtable", (),
                        False, 0, "noeviction", False)
    cands = SessionsPlanner().candidates(Workload("sessions", 100_000), caps)
    assert {c.partitions for c in cands if c.layout == "dense"} == {made.partitions}
