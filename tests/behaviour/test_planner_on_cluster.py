"""The planner on the 3-master cluster: the per-master partition counts it predicts (from
CLUSTER SLOTS) are the partition keys each master really holds once the planned store is
filled, and the CLI prints the cluster section."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from densekv import CompactSet, SessionStore
from densekv.tools.planner import plan
from densekv.tools.planner.cluster import read_ranges
from densekv.tools.server.cluster import LocalCluster, slot_ranges


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path_factory.getbasetemp() / "planner-cache-cluster"  # not test_planner.py's: its
    # assertions name where a calibration was measured, and a cached one was measured here
    monkeypatch.setenv("DENSEKV_CACHE_DIR", str(path))
    yield path


def _keys_per_master(cluster: LocalCluster, ranges: list[list[tuple[int, int]]], pattern: bytes) -> list[int]:
    """SCAN every master (found by the first slot of its ranges) for `pattern`."""
    out = []
    for rs in ranges:
        with cluster.node_of_slot(rs[0][0]).client() as c:
            out.append(sum(1 for _ in c.scan_iter(match=pattern, count=1000)))
    return out


def test_planned_session_partitions_per_master_are_what_each_master_holds(
        cluster_client: redis.RedisCluster, cluster: LocalCluster) -> None:
    n = 3000  # about 47 sessions per partition: no partition is left empty
    rec = plan("sessions", n, client=cluster_client, layouts=["dense"])
    spread = rec.cluster
    assert spread is not None and spread["slot_source"].startswith("CLUSTER SLOTS")
    assert spread["masters"] == 3 and sum(spread["partitions_per_master"]) == rec.partitions
    store = SessionStore(cluster_client, "pc", layout="dense", partitions=rec.partitions, expected_sessions=n,
                         index_identities=False)
    rng = random.Random(7)
    store.create_many([rng.randrange(1 << 24, 1 << 31) for _ in range(n)], None, batch=1000)
    held = _keys_per_master(cluster, spread["slot_ranges"], b"pc:sd:*")
    assert held == spread["partitions_per_master"]
    assert spread["imbalance"] == round(max(held) * 3 / sum(held), 4)


def test_planned_set_partitions_per_master_are_what_each_master_holds(
        cluster_client: redis.RedisCluster, cluster: LocalCluster) -> None:
    n = 20_000
    rec = plan("set", n, client=cluster_client, layouts=["dense-set"])
    spread = rec.cluster
    assert spread is not None and rec.layout == "dense-set"
    s = CompactSet(cluster_client, "pcs", layout="dense-set", expected=n, item_size=16, partitions=rec.partitions)
    rng = random.Random(8)
    s.add_many([rng.randbytes(16) for _ in range(n)])
    held = _keys_per_master(cluster, spread["slot_ranges"], b"pcs:ds*")
    assert held == spread["partitions_per_master"] and sum(held) == rec.partitions


def test_cluster_slots_are_read_as_the_cluster_was_built(cluster_client: redis.RedisCluster,
                                                         cluster: LocalCluster) -> None:
    assert read_ranges(cluster_client) == [[r] for r in slot_ranges(3)]
    with cluster.nodes[0].client() as node:  # a plain client on one node of the cluster
        assert read_ranges(node) == [[r] for r in slot_ranges(3)]


def test_read_ranges_of_a_server_without_cluster_is_none(client: redis.Redis) -> None:
    assert read_ranges(client) is None


def test_cli_prints_the_spread_over_masters(server_name: str) -> None:
    if server_name != "valkey-9.1":
        pytest.skip("the CLI is the same on every server")
    args = [sys.executable, "-m", "densekv.tools.planner", "--kind", "sessions", "--items", "5000", "--layout", "dense",
            "--masters", "6", "--server", "valkey-9.1"]
    done = subprocess.run([*args, "--json"], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["cluster"]
    assert out["masters"] == 6 and out["slot_source"] == "even split"
    assert sum(out["partitions_per_master"]) == json.loads(done.stdout)["partitions"]
    text = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
    assert text.returncode == 0, text.stderr
    assert f"imbalance {out['imbalance']:.3f}" in text.stdout and "master 5" in text.stdout
    if out["imbalance"] > 1.10:  # 5000 sessions make few partitions: the advice names a count
        assert f"{out['better_partitions']} partitions" in text.stdout
