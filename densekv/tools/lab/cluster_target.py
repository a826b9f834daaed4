"""`densekv lab --cluster`: the lab's target when it measures a cluster it started itself.

The cluster is densekv's own fixture, `densekv.embedded(server, cluster=3, replicas=1)`:
3 masters + 3 replicas on loopback, every node of the one binary --server names (the
embedded valkey by default). The lab owns it like a scratch server: it flushes every
master between measurements and stops the cluster at the end. The experiments talk to
it through a redis.RedisCluster client (densekv's kinds route their plans with
densekv/cluster_executor.py); memory comes from densekv/tools/measure_cluster.py: the sum over
the masters of each master's honest used_memory delta.

What a figure means here: bytes per item *per cluster*, that is of one copy of the data
(the replicas hold a copy each and are not read), with per-master bytes and the
imbalance (largest master / mean) beside every total. Each record carries them in
params.cluster, attached by the runner as the record is made (`split_of`: the meter's
latest reading against its baseline, checked to add up to the record's delta).

One-time costs of each master are paid before any baseline, as a warm-up does on one
server (`warm_up`): the Lua engine started and every densekv script loaded on every
master, and latency-tracking off (a server allocates a latency histogram the first time
it runs a command name; on one server the experiments' warm-ups run each command first,
but on a cluster a command first runs on each master at its own moment).

Experiments that cannot run correctly on a cluster set `Experiment.not_on_cluster` to
the reason; the runner reports them as skipped with it (never silently). A binary whose
cluster nodes never give a quiet reading (redis-7.0) is refused before anything is
measured (`_check_quiet`, LabRefused: one line, exit 2).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from importlib.resources import files
from typing import Any

import redis

from densekv.errors import LabRefused, MeterError
from densekv.tools.lab.experiments.base import Output, TableSpec
from densekv.tools.lab.results import RunRecord
from densekv.tools.lab.target import SCRATCH_OPTIONS, Target, stamp_of
from densekv.tools.measure_cluster import ClusterMeter, imbalance
from densekv.tools.server.binaries import ServerBinary

MASTERS = 3
REPLICAS = 1
#: settings of every node of the lab's cluster (besides the fixture's own)
CLUSTER_OPTIONS = {**SCRATCH_OPTIONS, "latency-tracking": "no"}


def cluster_name(binary: ServerBinary) -> str:
    """The name the cluster's records and report give it (`valkey-9.1-cluster`)."""
    return f"{binary.name}-cluster"


@contextlib.contextmanager
def cluster_target(binary: ServerBinary, masters: int = MASTERS, replicas: int = REPLICAS) -> Iterator[Target]:
    """Start `masters` x (1 + `replicas`) nodes of `binary` as one cluster for the lab;
    stop them (and remove their files) on exit."""
    from densekv.tools.server.embedded import embedded

    with embedded(binary.name, cluster=masters, replicas=replicas, options=CLUSTER_OPTIONS) as srv:
        client = srv.client()
        assert isinstance(client, redis.RedisCluster)
        meter = None
        try:
            meter = ClusterMeter(client, clear=True)
            stamp = stamp_of(meter.clients[0], cluster_name(binary), scratch=True)
            stamp = replace(stamp, cluster={"masters": masters, "replicas_per_master": replicas,
                                            "master_nodes": list(meter.names)})
            target = Target(cluster_name(binary), client, True, stamp, meter, binary=binary)
            warm_up(target)
            _check_quiet(meter, binary)
            yield target
        finally:
            if meter is not None:
                meter.close()
            client.close()


def warm_up(target: Target) -> None:
    """Start the Lua engine and load every densekv script on every master (about 256 KB
    and a few KB per script that a flush does not give back), then flush."""
    scripts = [f.read_bytes() for f in files("densekv.lua").iterdir() if f.name.endswith(".lua")]
    for node in target.masters():
        node.eval("return 0", 0)
        for source in scripts:
            node.script_load(source)
    target.clear()


#: seconds every master gets to show a quiet reading before the lab measures anything
QUIET_PROBE_S = 10.0


def _check_quiet(meter: ClusterMeter, binary: ServerBinary) -> None:
    """LabRefused if a master's used_memory never holds still (no honest reading there).
    redis-7.0 cluster nodes do not: buffers of ~6 KB come and go several times a second,
    outside every INFO overhead field (cluster-bus traffic: valkey 8+ and redis 7.4+ book
    theirs under mem_cluster_links and keep still between messages), and a server that
    reports no rehash state gets the meter's long quiet window."""
    try:
        meter.settle(timeout=QUIET_PROBE_S)
    except MeterError:
        raise LabRefused(
            f"--cluster on {binary.name}: used_memory on its cluster nodes never held still for "
            f"{QUIET_PROBE_S:.0f} s (buffers come and go several times a second), so no honest reading can be "
            "taken; run --cluster with redis-7.4 or newer, or a valkey"
        ) from None


# -- per-master figures ------------------------------------------------------------------


def split_of(target: Target, record: RunRecord) -> dict[str, Any] | None:
    """The record's per-master bytes and imbalance, from the meter's latest reading; None
    off a cluster, or when that reading is not the record's (its delta differs)."""
    meter = target.meter
    if not isinstance(meter, ClusterMeter) or meter.last is None or record.used_memory_delta is None:
        return None
    try:
        masters = meter.per_master()
    except MeterError:
        return None
    if sum(masters.values()) != record.used_memory_delta:
        return None
    return {"masters": masters, "imbalance": _rounded(imbalance(list(masters.values()))),
            "replicas_per_master": (target.stamp.cluster or {}).get("replicas_per_master")}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def describe(out: Output, target: Target) -> None:
    """Add the per-master table and the sentence on what the figures mean to an output
    measured on the cluster."""
    rows = []
    names: list[str] = []
    for r in out.records:
        split = r.params.get("cluster")
        if not split:
            continue
        names = names or list(split["masters"])
        rows.append([r.variant or r.layout, r.n, r.used_memory_delta,
                     *[split["masters"].get(name) for name in names], split["imbalance"]])
    cluster = target.stamp.cluster or {}
    out.method.append(
        f"Measured on a cluster of {cluster.get('masters')} masters with {cluster.get('replicas_per_master')} "
        "replica each (densekv.embedded(cluster=3, replicas=1)) through a redis.RedisCluster client: every "
        "figure is per cluster, the sum over the masters of each master's used_memory delta (each read by "
        "densekv's Meter: quiet, lazy frees drained, client and replication buffers netted out). Replicas hold "
        "a copy each and are not counted. Before any baseline the Lua engine was started and every densekv "
        "script loaded on every master, with latency-tracking off (one-time costs, not data)."
    )
    if rows:
        out.tables.append(TableSpec(
            f"Per master on {target.name}", ["configuration", "n", "cluster bytes", *names, "imbalance"], rows,
            "used_memory delta of each master at the record's n (they add up to the cluster's); imbalance = the "
            "largest master's delta / the mean. One partition (P = 1) lives on one master: 3.0 on 3 masters.",
        ))
    elif out.status == "ran":
        out.notes.append("no per-master figures: no record of this experiment came from a cluster reading")


def skipped(kind: str, server: str | None, why: str) -> Output:
    """The output of an experiment that does not run on a cluster, with the reason."""
    return Output(kind, server, status="skipped", reason=f"not run on a cluster: {why}")


def cluster_lines(doc: dict[str, Any]) -> list[str]:
    """Terminal lines for a cluster run: what the figures mean, each kind's imbalance
    range, and what was skipped and why (empty for a run on one server)."""
    clusters = [s for s in doc["servers"] if s.get("cluster")]
    if not clusters:
        return []
    c = clusters[0]["cluster"]
    lines = [(f"figures are per cluster ({c['masters']} masters + {c['masters'] * c['replicas_per_master']} "
              "replicas): the sum of the masters' used_memory deltas; each replica holds a copy, not counted")]
    kinds: dict[str, list[float]] = {}
    for r in doc["runs"]:
        split = (r.get("params") or {}).get("cluster")
        if split and split.get("imbalance") is not None:
            kinds.setdefault(r["kind"], []).append(float(split["imbalance"]))
    for kind, values in kinds.items():
        lines.append(f"{kind}: imbalance (largest master / mean) {min(values):.2f}-{max(values):.2f} "
                     f"over {len(values)} configurations")
    for e in doc["experiments"]:
        if e["status"] == "skipped" and e["reason"].startswith("not run on a cluster"):
            lines.append(f"{e['kind']}: skipped - {e['reason']}")
    return lines
