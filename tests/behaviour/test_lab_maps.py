"""The lab's maps experiment (seed 004) on real servers: the records it writes for every
case and configuration, that what it read back is what it wrote, that its bytes per item
hold against a plain used_memory delta on a fresh server, and that a trained zstd
dictionary beats plain JSON SET on every server."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from densekv.maps import CompactMap
from densekv.tools.lab.experiments.base import Context
from densekv.tools.lab.experiments.maps import CASES, NAMESPACE, PLAN, Maps, dataset
from densekv.tools.lab.results import validate
from densekv.tools.lab.runner import LabConfig, run_lab
from densekv.tools.lab.target import scratch_target
from densekv.tools.lab.workloads import chunks
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

PRESENT = find_servers()
_WANTED = os.environ.get("DENSEKV_TEST_SERVERS", "valkey-9.1").split(",")
AGREEMENT_SERVERS = [name for name in ("valkey-9.1",) if name in PRESENT and name in _WANTED]
#: every case and every codec once (the redundant configurations of the full plan left out)
TINY_CONFIGS = ("int_holey · plain SET", "int_holey · map int", "int_holey · plain zipped SET",
                "int_seq · plain SET", "int_seq · map int", "str8 · plain SET", "str8 · map raw",
                "json · plain SET", "json · map zstd+dict", "json · map raw", "json · map msgpack",
                "json · map lz4", "json · map zstd", "html · plain SET", "html · map zlib")
TINY = {"items": {"int_holey": 400, "int_seq": 400, "str8": 400, "html": 60, "json": 150}, "ops": 100,
        "configs": TINY_CONFIGS}


def test_a_tiny_maps_lab_writes_valid_records_for_each_case_and_codec(tmp_path: Path) -> None:
    run = run_lab(LabConfig(n=400, only=("maps",), out=tmp_path, options={"maps": TINY}))
    doc = json.loads((tmp_path / "results.json").read_text())
    assert validate(doc) == [] and run.failed == []
    assert [(e["kind"], e["status"]) for e in doc["experiments"]] == [("maps", "ran")]
    runs = {r["variant"]: r for r in doc["runs"] if r["kind"] == "maps"}
    assert set(runs) == set(TINY_CONFIGS)  # zstandard and lz4 are test extras: nothing skipped
    assert set(TINY_CONFIGS) <= {c.label for c in PLAN}
    assert {r["params"]["case"] for r in runs.values()} == set(CASES)
    for r in runs.values():
        items = TINY["items"][r["params"]["case"]]
        assert r["n"] == items and r["points"][-1]["n"] == items and r["ops"]["load"]["count"] == items
        assert r["bytes_per_item"] > 0 and r["op"] == "get" and r["ops_per_s"] > 0, (
            r["variant"], r["used_memory_delta"], r["params"].get("timing"))
        assert r["server_usec_per_call"] > 0 and r["ops"]["set"]["server_usec_per_call"] > 0
        assert r["ops"]["get"]["count"] == min(100, items) and r["ops"]["get"]["unexpected"] == 0, r["variant"]
        if r["layout"] == "map":
            assert r["partitions"] >= 1 and r["params"]["bucket_encodings"].get("hashtable", 0) == 0
        else:
            assert r["partitions"] is None
    for case in ("int_holey", "int_seq", "str8"):  # the hash buckets beat plain SET
        plain = runs[f"{case} · plain SET"]["bytes_per_item"]
        mapped = next(r for r in runs.values() if r["params"]["case"] == case and r["layout"] == "map")
        assert mapped["bytes_per_item"] < plain / 2, case
    assert runs["int_holey · plain zipped SET"]["params"]["key_example"].startswith("b:#")
    # JSON compressed with the trained dictionary fits the listpack; raw JSON goes out of line
    assert runs["json · map zstd+dict"]["params"]["out_of_line_keys"] == 0
    assert runs["json · map raw"]["params"]["out_of_line_keys"] == 150
    html = (tmp_path / "report.html").read_text()
    assert "Maps on valkey-9.1" in html and "x less than plain" in html
    assert (tmp_path / "maps-valkey-9.1-bytes-per-item.png").stat().st_size > 10_000


def test_json_with_a_trained_zstd_dictionary_beats_plain_json_set(server_name: str) -> None:
    if server_name == "valkey-9.1":
        pytest.skip("the tiny lab run above checks this on valkey-9.1")
    with scratch_target(PRESENT[server_name]) as target:
        out = Maps().run(Context(target, 400, options={
            "cases": ("json",), "configs": ("plain", "map zstd+dict"), "items": {"json": 1000}, "ops": 50}))
    runs = {r.variant: r for r in out.records}
    plain, zstd = runs["json · plain SET"], runs["json · map zstd+dict"]
    assert plain.server == zstd.server == server_name and plain.n == zstd.n == 1000
    assert zstd.bytes_per_item is not None and plain.bytes_per_item is not None
    assert zstd.bytes_per_item < plain.bytes_per_item / 2, (zstd.bytes_per_item, plain.bytes_per_item)
    assert zstd.ops["get"]["unexpected"] == 0


def _plain_delta(proc: ServerProcess, case: str, n: int) -> float:
    """The naive but honest reference on a fresh server: one reading before, one after,
    loading through CompactMap.mset (not the lab's batches). A throwaway map first pays
    the server's one-time Lua start-up, as the lab does before it measures."""
    client = proc.client()
    warm = CompactMap(client, "warm", codec="raw", expected=10)
    warm.set("w:1", "x")
    client.execute_command("FLUSHALL", "SYNC")
    client.close()
    client = proc.client()
    time.sleep(0.5)
    before = client.info("memory")["used_memory"]
    m = CompactMap(client, NAMESPACE, codec="raw", expected=n)
    for part in chunks(dataset(case, n), 5000):
        m.mset(dict(part))
    client.close()
    client = proc.client()
    time.sleep(1.5)  # let rehashing and client-buffer shrinking finish
    after = client.info("memory")["used_memory"]
    assert m.get(part[-1][0]) == part[-1][1]
    client.close()
    return float(after - before) / n


@pytest.mark.parametrize("server_name", AGREEMENT_SERVERS)
def test_map_bytes_per_item_agree_with_a_plain_delta(fresh_server: Callable[..., ServerProcess],
                                                     server_name: str) -> None:
    n = 20_000
    proc = fresh_server(server_name)
    with scratch_target(proc.binary) as target:  # the lab's own server; the reference gets a fresh one
        out = Maps().run(Context(target, n, options={
            "cases": ("str8",), "configs": ("map raw",), "items": {"str8": n}, "ops": 100}))
    record = out.records[0]
    assert record.variant == "str8 · map raw" and record.n == n and record.bytes_per_item is not None
    reference = _plain_delta(proc, "str8", n)
    print(f"lab {record.bytes_per_item:.2f} B/item, reference {reference:.2f} B/item")
    assert abs(record.bytes_per_item - reference) / reference < 0.05, (record.bytes_per_item, reference)
