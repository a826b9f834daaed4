"""`densekv lab --cluster`: the lab on a 3-master + 3-replica cluster it starts itself.

What must hold: the experiments that can run on a cluster run there through a
RedisCluster client and their figures are per cluster (each record's per-master bytes add
up to its total); the ones that cannot are reported skipped with their reason (in the
document, the report and the terminal), never silently; the cluster is gone afterwards;
bad combinations of options are one line and exit 2."""

from __future__ import annotations

import html as html_text
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from densekv.errors import LabRefused
from densekv.tools.lab.experiments import registry
from densekv.tools.lab.results import validate
from densekv.tools.lab.runner import LabConfig, run_lab
from densekv.tools.server.binaries import find_servers

PRESENT = find_servers()
_WANTED = os.environ.get("DENSEKV_TEST_SERVERS", ",".join(PRESENT)).split(",")
N = 2000
TINY: dict[str, dict[str, Any]] = {
    "sessions": {"layouts": ("dense", "json", "zset seed 256"), "per_decade": 2, "gets": 300},
    "sets": {"layouts": ("set", "hash", "dense"), "partitions": (1, 64), "cas": 200, "absent": 1000},
    "maps": {"cases": ("int_holey",), "configs": ("plain", "map int"), "items": {"int_holey": 600}, "ops": 100},
}
RUNS_ON_CLUSTER = ("sessions", "sets", "maps")
#: servers whose cluster nodes' used_memory never holds still: the lab refuses to measure there
NEVER_QUIET = ("redis-7.0",)
SKIPPED = tuple(k for k, e in registry().items() if e.not_on_cluster)


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "densekv.tools.lab", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ}, check=False)


def _answers(node: str) -> bool:
    host, port = node.rsplit(":", 1)
    try:
        with redis.Redis(host=host, port=int(port), socket_connect_timeout=0.5) as c:
            return bool(c.ping())
    except redis.ConnectionError:
        return False


def test_a_tiny_lab_on_the_cluster_reports_per_cluster_and_per_master(server_name: str, tmp_path: Path) -> None:
    only = (*RUNS_ON_CLUSTER, *SKIPPED)
    config = LabConfig(cluster=True, servers=(server_name,), n=N, only=only, out=tmp_path, options=TINY)
    if server_name in NEVER_QUIET:
        with pytest.raises(LabRefused, match="never held still .* run --cluster with redis-7.4 or newer"):
            run_lab(config)
        assert not (tmp_path / "results.json").exists()
        return
    run = run_lab(config)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert validate(doc) == [] and not run.failed
    [stamp] = doc["servers"]
    assert stamp["name"] == f"{server_name}-cluster" and stamp["version"] == PRESENT[server_name].version
    assert stamp["cluster"]["masters"] == 3 and stamp["cluster"]["replicas_per_master"] == 1
    assert len(stamp["cluster"]["master_nodes"]) == 3
    status = {e["kind"]: e for e in doc["experiments"]}
    for kind in RUNS_ON_CLUSTER:
        assert status[kind]["status"] == "ran", status[kind]
    for kind in SKIPPED:  # skipped, each with its reason, or not available in this build
        entry = status[kind]
        assert entry["status"] in ("skipped", "not available"), entry
        if entry["status"] == "skipped":
            assert entry["reason"].startswith("not run on a cluster: ") and len(entry["reason"]) > 40
    assert {r["kind"] for r in doc["runs"]} == set(RUNS_ON_CLUSTER)

    for r in doc["runs"]:
        split = r["params"]["cluster"]  # every record measured on the cluster has its split
        masters = list(split["masters"].values())
        assert set(split["masters"]) == set(stamp["cluster"]["master_nodes"])
        assert sum(masters) == r["used_memory_delta"], r["variant"]
        assert split["imbalance"] == pytest.approx(max(masters) / (sum(masters) / 3), abs=1e-3)
        if r["partitions"] == 1:  # one partition: one master holds it all, the others (next to) nothing
            assert max(abs(m) for m in sorted(masters)[:2]) < 0.01 * sum(masters), (r["variant"], masters)
            assert split["imbalance"] == pytest.approx(3.0, abs=0.05)
    sessions = {r["variant"]: r for r in doc["runs"] if r["kind"] == "sessions"}
    assert sessions["dense"]["bytes_per_item"] < sessions["json"]["bytes_per_item"]
    assert sessions["dense"]["ops"]["get"]["found"] == 300 and sessions["dense"]["server_usec_per_call"] > 0
    assert max(sessions["json"]["params"]["cluster"]["masters"].values()) < 0.5 * sessions["json"]["used_memory_delta"]
    sets = [r for r in doc["runs"] if r["kind"] == "sets"]
    assert all(r["ops"][p]["unexpected"] == 0 for r in sets for p in ("cas_hit", "cas_miss", "contains_hit",
                                                                       "contains_miss"))

    html = (tmp_path / "report.html").read_text()
    assert "Per cluster." in html and "Replicas hold a copy" in html and f"Per master on {server_name}-cluster" in html
    for kind in SKIPPED:
        if status[kind]["status"] == "skipped":
            assert html_text.escape(status[kind]["reason"]) in html
    assert not any(_answers(node) for node in stamp["cluster"]["master_nodes"])  # the cluster was stopped


def test_the_cli_prints_what_the_figures_mean_and_what_it_skipped(tmp_path: Path) -> None:
    if "valkey-9.1" not in _WANTED:
        pytest.skip("the CLI run uses the embedded valkey-9.1, left out by DENSEKV_TEST_SERVERS")
    out = run_cli("--cluster", "--n", str(N), "--only", "sessions,small_sets", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("sessions (N = 2,000): densekv ") for line in lines)
    assert any(line.startswith("figures are per cluster (3 masters + 3 replicas)") for line in lines)
    assert any(line.startswith("sessions: imbalance (largest master / mean) ") for line in lines)
    assert any(line.startswith("small_sets: skipped - not run on a cluster: ") for line in lines)
    assert "small_sets on valkey-9.1-cluster: skipped" in out.stderr  # said as it happened, too
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["command"].startswith("densekv lab --cluster")


def _two_servers() -> list[str]:
    return [name for name in ("valkey-9.1", "redis-7.0", "redis-7.4", "valkey-8.0") if name in PRESENT][:2]


@pytest.mark.parametrize("args,message", [
    (["--cluster", "--url", "redis://127.0.0.1:1/0"], "give --cluster or --url, not both"),
    (["--cluster", "--server", ",".join(_two_servers())], "--cluster takes one --server"),
    (["--cluster", "--server", "redis-2.8"], "unknown server"),
])
def test_bad_cluster_options_are_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    if len(_two_servers()) < 2 and "," in args[-1]:
        pytest.skip("needs two servers of the matrix present")
    out = run_cli(*args, "--out", str(tmp_path), timeout=60)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results.json").exists()
