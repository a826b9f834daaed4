"""The analyzer's figures against the truth, on a keyspace written by the real producers (issue 23).

The keyspace (tests/behaviour/producers.py, a small scale of issue 23's): Flask-Session and
Django cache sessions, SETNX flags, integer counters, small SETs per parent job, hashes of
objects, small lists, JSON values with TTLs, a long list and a stream, recorded once and
sent again to each fresh server. The truth per pattern: its real key count (SCAN MATCH)
and what deleting its keys frees (used_memory before/after, the meter), each on its own copy.
  * counts: `--sample` counts every key by name, so each pattern's count is exact;
  * bytes now (MEMORY USAGE of a per-pattern sample + the per-key overhead the replay
    calibrated on a scratch server) within 5% of what deleting the pattern frees;
  * intervals that hold: many runs with different samples (Options.seed), and the
    share of runs whose 95% interval holds the pattern's true total MEMORY USAGE.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from densekv.tools.analyze.run import Options, analyze
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess
from tests.behaviour.producers import TRUTH_OPTIONS, Keyspace, record, removal_truth, replay

PRESENT = find_servers()
if os.environ.get("DENSEKV_TEST_SERVERS"):
    PRESENT = {k: v for k, v in PRESENT.items() if k in os.environ["DENSEKV_TEST_SERVERS"].split(",")}
QUIET = TRUTH_OPTIONS
SCALE = 0.05  # ~14,000 keys: 5,000 flags, 4,000 counters, 1,000 Flask sessions, 500 small sets...
RUNS = 60


@pytest.fixture(scope="module")
def keyspace() -> Keyspace:
    if "valkey-9.1" not in PRESENT:
        pytest.skip("needs valkey-9.1")
    with ServerProcess(PRESENT["valkey-9.1"], options=QUIET) as rec:
        return record(rec.url, SCALE)


@pytest.fixture(scope="module")
def server(keyspace: Keyspace) -> Iterator[ServerProcess]:
    proc = ServerProcess(PRESENT["valkey-9.1"], options=QUIET).start()
    with proc.client() as c:
        replay(c, keyspace.commands)
    yield proc
    proc.stop()


def _rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["pattern"]: r for r in doc["patterns"]}


def test_counts_are_exact_and_bytes_now_what_deleting_frees(keyspace: Keyspace, server: ServerProcess) -> None:
    doc = analyze(Options(url=server.url, sample=1500, replay_keys=300))
    assert doc["counted"] and doc["keys_total"] == keyspace.keys
    rows = _rows(doc)
    misses, small, ours, truth = {}, set(), 0, 0
    for part in keyspace.parts:
        with ServerProcess(PRESENT["valkey-9.1"], options=QUIET) as copy, copy.client() as c:
            replay(c, keyspace.commands)
            keys, freed = removal_truth(c, part, lambda cl: Meter(cl, clear=True))
        row = rows[part.pattern]
        assert row["keys"] == keys == part.count and row["keys_interval"] == [keys, keys], row
        misses[part.pattern] = round(row["bytes_now"] / freed - 1, 4)
        ours, truth = ours + row["bytes_now"], truth + freed
        if freed / keys < 100:
            small.add(part.pattern)
    # every pattern calibrated on the scratch server (the stream too: copied with its IDs)
    assert all(rows[p.pattern]["overhead_measured"] for p in keyspace.parts)
    print("bytes now / what deleting frees - 1:", misses)  # pytest -s shows it
    # issue 23's 5% (benchmarks/analyze_accuracy.py checks it at 280k keys); keys under
    # 100 B on this small keyspace: 10% (valkey-9.1's hashtable and libc malloc free a few
    # bytes more or less per key depending on what came in around it: +-3 B is 6% of a
    # 50-byte counter; two CI runs on a loaded machine read `user:{n}` at +8.4% and +8.9%,
    # the idle ones within 8%)
    assert all(abs(m) <= (0.10 if p in small else 0.05) for p, m in misses.items()), misses
    assert abs(ours / truth - 1) <= 0.02, (ours, truth)


def test_the_95_intervals_hold_the_truth_at_least_95_percent_of_the_time(server: ServerProcess) -> None:
    """RUNS analyses with different per-pattern samples (no replay: bytes now is then the
    MEMORY USAGE part alone, whose truth a full scan gives exactly)."""
    exact = _rows(analyze(Options(url=server.url, sample=None, replay=False)))
    inside = total = 0
    missed: list[tuple[str, int, list[int]]] = []
    for seed in range(RUNS):
        doc = analyze(Options(url=server.url, sample=400, replay=False, seed=seed))
        assert doc["counted"] and doc["keys_sampled"] == 400
        for name, row in _rows(doc).items():
            truth = exact[name]
            assert row["keys"] == truth["keys"]
            if row["sampled"] >= row["keys"]:  # every key looked at: exact
                assert row["bytes_now"] == truth["bytes_now"]
                continue
            total += 1
            lo, hi = row["bytes_now_interval"]
            if lo <= truth["bytes_now"] <= hi:
                inside += 1
            else:
                missed.append((name, truth["bytes_now"], [lo, hi]))
    assert total >= RUNS * 6
    print(f"intervals holding the truth: {inside}/{total} = {inside / total:.3f}")  # pytest -s shows it
    assert inside / total >= 0.95, (inside, total, missed[:10])


def test_a_counted_sample_stopped_in_the_names_pass_resumes_to_the_same_report(
        keyspace: Keyspace, server: ServerProcess, tmp_path: Any) -> None:
    state = tmp_path / "scan.json"
    calls = [0]

    def stop_after_two() -> bool:
        calls[0] += 1
        return calls[0] > 2

    first = analyze(Options(url=server.url, sample=500, replay=False, resume=str(state)), stop=stop_after_two)
    assert first["interrupted"] and not first["complete"] and not first["counted"]
    again = analyze(Options(url=server.url, sample=500, replay=False, resume=str(state)))
    whole = analyze(Options(url=server.url, sample=500, replay=False))
    assert again["complete"] and again["counted"]
    assert _rows(again).keys() == _rows(whole).keys()
    for name, row in _rows(whole).items():
        assert _rows(again)[name]["keys"] == row["keys"]
        assert _rows(again)[name]["bytes_now"] == row["bytes_now"]  # the same draw: the same sample


def test_past_the_names_limit_the_counts_are_estimates_with_intervals(server: ServerProcess,
                                                                      keyspace: Keyspace) -> None:
    doc = analyze(Options(url=server.url, sample=2000, replay=False, names_limit=1000))
    assert not doc["counted"] and doc["keys_sampled"] == 2000
    for part in keyspace.parts:
        row = _rows(doc).get(part.pattern)
        if row is None or part.count < 100:
            continue
        lo, hi = row["keys_interval"]
        assert lo < hi and lo <= row["keys"] <= hi
