"""Failover on the replicated cluster (3 masters + 3 replicas, node timeout 1.5 s) under
writers running sessions, set adds and map increments (tests/behaviour/cluster_writers.py).

  * CLUSTER FAILOVER (coordinated): nothing lost or revived, no error but NotDurable (a
    revocation whose WAIT the promoted replica stopped answering).
  * SIGKILL of the busiest master: every writer works again within the executor's
    recovery bound (densekv.cluster_executor.RECOVERY_SECONDS; 2-4 s here), without a
    new client; the only errors while the slots have no master are WriteInDoubt (a write
    sent just before the kill, never re-sent). Without durable, acknowledged writes the
    replica had not received are lost: counted and printed, not asserted. With
    durable=True every acknowledged write survives (NotDurable is the error a write gets
    while its master has no replica left; heal() brings the killed node back as one).
Before issue 17's fix, clients kept failing on the dead master's port for as long as
anyone watched (35 s).
"""

from __future__ import annotations

import time

import pytest
import redis

from densekv.cluster_executor import RECOVERY_SECONDS
from densekv.tools.server.cluster import LocalCluster
from tests.behaviour.cluster_writers import KINDS, Writer, busiest_master, check, stall_after

pytestmark = pytest.mark.cluster

ALLOWED_AFTER_KILL = ("WriteInDoubt", "NotDurable")


def run_writers(cluster: LocalCluster, name: str, durable: bool = False) -> list[Writer]:
    writers = [Writer(cluster, kind, name=name, seed=i, durable=durable) for i, kind in enumerate(KINDS)]
    for w in writers:
        w.start()
    time.sleep(0.5)
    return writers


def test_manual_failover_loses_nothing(replicated_client: redis.RedisCluster,
                                       replicated_cluster: LocalCluster) -> None:
    writers = run_writers(replicated_cluster, "mf")
    replica = replicated_cluster.replicas_of(busiest_master(replicated_cluster))[0]
    replicated_cluster.failover(replica)
    time.sleep(0.5)
    for w in writers:
        w.stop()
    for w in writers:
        # A revocation (a session destroyed or rotated) waits for a replica: WAIT on the
        # old master that a replica stops acknowledging as it is promoted answers 0 and is
        # raised as NotDurable ("could not confirm"; seen once in CI under a CPU hog). That
        # is the honest answer, not a loss: what must hold is nothing lost or revived.
        unexpected = [e for e in w.log.errors if not e[1].startswith("NotDurable")]
        assert unexpected == [], (w.kind, unexpected[:3])
        result = check(w)
        assert (result.lost, result.duplicated, result.revived) == (0, 0, 0), result


def kill_under_writers(cluster: LocalCluster, name: str, durable: bool) -> tuple[list[Writer], float]:
    writers = run_writers(cluster, name, durable)
    victim = busiest_master(cluster)
    killed_at = time.monotonic()
    cluster.kill_master(victim, wait=True)
    if durable:  # the promoted replica has no replica of its own until the old master is back
        cluster.heal()
    time.sleep(1.0)
    for w in writers:
        w.stop()
    return writers, killed_at


def test_sigkill_of_a_master_clients_recover(replicated_client: redis.RedisCluster,
                                              replicated_cluster: LocalCluster) -> None:
    writers, killed_at = kill_under_writers(replicated_cluster, "kill", durable=False)
    stalls = [stall_after(w, killed_at) for w in writers]
    results = [check(w) for w in writers]
    print(f"\nlongest stall per writer after SIGKILL (s): {[round(r, 2) for r in stalls]}; "
          f"lost without durable (kind, lost, acknowledged): "
          f"{[(r.kind, r.lost, r.acknowledged) for r in results]}; revived: {[r.revived for r in results]}")
    assert max(stalls) > 1.0, "no writer noticed the kill: its keys were not on the killed master"
    assert max(stalls) < RECOVERY_SECONDS
    for w in writers:
        assert w.log.ok[-1] > killed_at  # writing again, same client
        bad = [e for _, e in w.log.errors if not e.startswith(ALLOWED_AFTER_KILL)]
        assert bad == [], (w.kind, bad[:3])
        assert w.log.in_doubt <= 2
    for r in results:
        assert r.duplicated == 0, r


def test_sigkill_with_durable_keeps_every_acknowledged_write(
        replicated_client: redis.RedisCluster, replicated_cluster: LocalCluster) -> None:
    writers, killed_at = kill_under_writers(replicated_cluster, "dur", durable=True)
    for w in writers:
        assert w.log.ok[-1] > killed_at
        bad = [e for _, e in w.log.errors if not e.startswith(ALLOWED_AFTER_KILL)]
        assert bad == [], (w.kind, bad[:3])
        result = check(w)
        print(result, "errors:", len(w.log.errors))
        assert (result.lost, result.duplicated, result.revived) == (0, 0, 0), result
