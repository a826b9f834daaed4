"""results.json: the schema, its documentation, and the pure helpers around it."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from densekv.tools.lab.experiments import registry
from densekv.tools.lab.experiments.sessions import plan_variants
from densekv.tools.lab.observe import converted_share, stats_delta
from densekv.tools.lab.results import (
    DOCUMENT_FIELDS,
    EXPERIMENT_FIELDS,
    FIELDS,
    POINT_FIELDS,
    RunRecord,
    ServerStamp,
    build_document,
    validate,
    write_results,
)
from densekv.tools.lab.sizing import (
    checkpoints,
    nearest_power_of_two,
    scaled_partitions,
    sizes_around,
)
from densekv.tools.lab.target import redact

DOC = Path(__file__).resolve().parents[2] / "docs" / "lab-results.md"
STAMP = ServerStamp("valkey-9.1", "valkey", "9.1.2", "libc", {"hash_max_listpack_entries": 512})


def a_document() -> dict:  # type: ignore[type-arg]
    record = RunRecord.stamped(STAMP, kind="sessions", layout="dense", partitions=8, n=1000,
                               bytes_per_item=30.5, points=[{"n": 1000, "bytes_per_item": 30.5}])
    return build_document(command="densekv lab", n=1000, servers=[STAMP], runs=[record], experiments=[
        {"kind": "sessions", "title": "t", "seed": "000", "status": "ran", "reason": "", "server": "valkey-9.1",
         "seconds": 1.0, "notes": [], "trimmed": "", "pace": 1.2}])


def test_a_built_document_is_valid_and_written(tmp_path: Path) -> None:
    doc = a_document()
    assert validate(doc) == []
    assert write_results(doc, tmp_path).name == "results.json"


@pytest.mark.parametrize("breaks,expected", [
    (lambda d: d["runs"][0].pop("bytes_per_item"), "missing bytes_per_item"),
    (lambda d: d["runs"][0].update(n="1000"), "runs[0].n: string"),
    (lambda d: d["runs"][0]["points"][0].update(n=None), "points[0].n: null"),
    (lambda d: d["experiments"][0].update(status="faked"), "status"),
    (lambda d: d.update(schema="other/9"), "schema"),
    (lambda d: d["experiments"][0].pop("trimmed"), "missing trimmed"),
    (lambda d: d.update(interrupted="no"), "interrupted: string"),
])
def test_validate_names_what_is_wrong(breaks, expected: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(a_document())
    breaks(doc)
    errors = validate(doc)
    assert any(expected in e for e in errors), errors
    with pytest.raises(ValueError, match="schema"):
        write_results(doc, tmp_path)


def test_the_doc_names_every_field() -> None:
    text = DOC.read_text()
    for fields in (FIELDS, POINT_FIELDS, DOCUMENT_FIELDS, EXPERIMENT_FIELDS):
        for name in fields:
            assert re.search(rf"`{re.escape(name)}`", text), name


def test_commandstats_delta_counts_wrapped_commands_once() -> None:
    before = {"hset": (10, 100), "exec": (1, 50), "info": (3, 30)}
    after = {"hset": (110, 400), "zadd": (100, 200), "exec": (101, 950), "multi": (100, 10), "info": (9, 90)}
    total, per = stats_delta(before, after)
    assert total == 900 + 10  # EXEC (includes the HSET/ZADD inside) + MULTI
    assert per["hset"]["calls"] == 100 and "info" not in per
    total, per = stats_delta({"get": (0, 0)}, {"get": (50, 100), "config|get": (2, 5)})
    assert total == 100 and list(per) == ["get"]


def test_converted_share() -> None:
    assert converted_share({}) is None
    assert converted_share({"listpack": 3, "hashtable": 1}) == 0.25
    assert converted_share({"listpack": 2, "skiplist": 2}) == 0.5


def test_sizing() -> None:
    assert checkpoints(100_000)[0] == 1000 and checkpoints(100_000)[-1] == 100_000
    assert len(checkpoints(100_000)) == 11
    assert checkpoints(3000)[0] == 300 and checkpoints(5) == [1, 2, 3, 4, 5]
    assert [nearest_power_of_two(x) for x in (0.3, 1, 3, 5, 6, 1000)] == [1, 1, 4, 4, 8, 1024]
    assert scaled_partitions(65_536, 40_000_000) == 65_536
    assert scaled_partitions(65_536, 100_000) == 128
    grid = sizes_around([128, 512], 4096)
    assert {127, 128, 129, 511, 512, 513, 4096} <= set(grid) and grid == sorted(set(grid))


def test_session_variants_measure_equal_partition_counts_once() -> None:
    variants, notes = plan_variants(100_000, True, 512, 128)
    labels = [v.label for v in variants]
    assert labels[:2] == ["dense", "json"] and "fieldttl" in labels
    assert {"zset seed 256", "zset seed 65k", "zset seed 1M", "packed", "hash"} <= set(labels)
    assert len({(v.layout, v.partitions) for v in variants}) == len(variants)
    assert notes == []  # zset sized for N = seed 1M scaled: said in that variant's record, not as a note
    seed_1m = next(v for v in variants if v.label == "zset seed 1M")
    assert "zset" not in labels and "densekv's rule" in seed_1m.note
    variants, notes = plan_variants(100_000, False, 512, 128)
    assert "fieldttl" not in [v.label for v in variants] and notes == [
        "fieldttl: not measured - this server has no hash field TTL"]


def test_registry_lists_the_experiments_and_admits_the_missing_ones() -> None:
    reg = registry()
    assert [k for k in reg if k != "containers"] == ["sessions", "sets", "small_sets", "maps", "matrix"]
    assert reg["sessions"].available and reg["small_sets"].available and reg["maps"].available
    for exp in reg.values():  # whatever is missing says why
        assert exp.available or "not available" in exp.reason, exp.kind
        assert exp.kind and exp.title and exp.budget_s > 0
    assert reg["maps"].seed == "004" and reg["maps"].budget_s <= 25
    # the default lab's budgets, with the report and the server's start, fit 3 minutes (the
    # containers' curve up to 100k stored sessions, issue 23, took 20 of the 30 s left)
    assert sum(e.budget_s for e in reg.values() if e.per_server) <= 170


def test_redact() -> None:
    assert redact("redis://:secret@host:6379/2") == "redis://:***@host:6379/2"
    assert redact("redis://user:pw@h/0") == "redis://user:***@h/0"
    assert redact("redis://h:1/0") == "redis://h:1/0"
