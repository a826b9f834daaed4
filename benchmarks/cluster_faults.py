"""Issue 17's cluster figures: recovery after a SIGKILLed master, writes lost without
durable, and the longest MIGRATE of a densekv partition of a 1M-session store.

  recovery  A fresh densekv.embedded(cluster=3, replicas=1) (node timeout 1.5 s) per
            server; writers (sessions create/regenerate/destroy, set adds, map incr; the
            test suite's tests/behaviour/cluster_writers.py, one thread each, non-durable)
            run (`--bulk`: also map mset batches of 200 keys); the busiest master is SIGKILLed; `stall_s` is the longest any writer
            waited for an acknowledgement after the kill (the executor rides out the
            failover inside the call), `promoted_s` when a replica served the slots
            again. Then the writers stop and their logs are checked against the data:
            `lost` acknowledged writes, `revived` given-up tokens live again. The killed
            node is restarted (it rejoins as a replica) before the next round.
  migrate   A 3-master cluster, N sessions (dense layout, identity index on, integer
            identities) created through SessionStore.create_many; the `--slots` largest
            keys (MEMORY USAGE) have their slots moved to another master with
            SETSLOT + MIGRATE (100 keys per call). Per slot: the client-side time of the
            longest MIGRATE call, and the server's own time for it (SLOWLOG, threshold 0).

Prints one JSON record per measurement.

Usage: python benchmarks/cluster_faults.py [--part recovery|migrate ...] [--server NAME ...]
       [--rounds 3] [--bulk] [--n 1000000] [--slots 20] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test suite's writers (and densekv)

import densekv
from densekv import SessionStore
from densekv.tools.server.binaries import find_servers
from tests.behaviour.cluster_writers import KINDS, Writer, busiest_master, check, stall_after


def emit(record: dict[str, object], out: str | None) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def recovery(server: str, rounds: int, out: str | None, commit: str, kinds: tuple[str, ...] = KINDS) -> None:
    stalls: list[float] = []
    with densekv.embedded(server, cluster=3, replicas=1) as srv:
        cluster = srv.cluster
        assert cluster is not None
        for r in range(rounds):
            writers = [Writer(cluster, kind, name=f"r{r}", seed=i) for i, kind in enumerate(kinds)]
            for w in writers:
                w.start()
            time.sleep(1.0)
            victim = busiest_master(cluster)
            slots = cluster.topology().by_port(victim.port).slots
            killed_at = time.monotonic()
            cluster.kill_master(victim, wait=False)
            while cluster.topology().owner_port(min(slots)) == victim.port:
                time.sleep(0.02)
            promoted = time.monotonic() - killed_at
            cluster.wait_healthy(60)
            time.sleep(1.0)
            for w in writers:
                w.stop()
            stall = max(stall_after(w, killed_at) for w in writers)
            stalls.append(stall)
            results = [check(w) for w in writers]
            emit({"benchmark": "cluster_faults", "part": "recovery", "server": server, "round": r,
                  "kinds": list(kinds),
                  "commit": commit, "stall_s": round(stall, 3), "promoted_s": round(promoted, 3),
                  "errors": sum(len(w.log.errors) for w in writers),
                  "in_doubt": sum(w.log.in_doubt for w in writers),
                  "acknowledged": {c.kind: c.acknowledged for c in results},
                  "lost": {c.kind: c.lost for c in results},
                  "duplicated": {c.kind: c.duplicated for c in results},
                  "revived": sum(c.revived for c in results)}, out)
            cluster.heal()
    emit({"benchmark": "cluster_faults", "part": "recovery_summary", "server": server, "commit": commit,
          "kinds": list(kinds),
          "rounds": rounds, "median_stall_s": round(statistics.median(stalls), 3),
          "max_stall_s": round(max(stalls), 3)}, out)


def migrate(server: str, n: int, slots: int, out: str | None, commit: str) -> None:
    from redis.crc import key_slot

    with densekv.embedded(server, cluster=3) as srv:
        cluster = srv.cluster
        assert cluster is not None
        client = srv.client()
        store = SessionStore(client, layout="dense", expected_sessions=n)
        started = time.monotonic()
        batch = 5000
        for lo in range(0, n, batch):
            store.create_many(range(lo, min(n, lo + batch)), batch=batch)
        load_s = time.monotonic() - started
        sizes: list[tuple[int, bytes, object]] = []
        for node in cluster.primaries():
            with node.client() as c:
                for key in c.scan_iter(count=5000):
                    sizes.append((int(c.memory_usage(key, samples=0) or 0), key, node))
        sizes.sort(reverse=True)
        for node in cluster.primaries():
            with node.client() as c:
                c.config_set("slowlog-log-slower-than", 0)
                c.config_set("slowlog-max-len", 10000)
                c.slowlog_reset()
        done: set[int] = set()
        worst_client = worst_server = 0.0
        for usage, key, _ in sizes:
            slot = key_slot(key)
            if slot in done:
                continue
            done.add(slot)
            source = cluster.node_of_slot(slot)
            target = next(m for m in cluster.primaries() if m.port != source.port)
            report = cluster.migrate_slot(slot, target, batch=100)
            with source.client() as c:
                server_us = max((e["duration"] for e in c.slowlog_get(10000)
                                 if e["command"].upper().startswith(b"MIGRATE")), default=0)
                c.slowlog_reset()
            worst_client = max(worst_client, report.longest_migrate)
            worst_server = max(worst_server, server_us / 1000)
            emit({"benchmark": "cluster_faults", "part": "migrate", "server": server, "commit": commit,
                  "n": n, "slot": slot, "largest_key": key.decode(errors="replace"), "key_bytes": usage,
                  "keys": report.keys, "calls": report.calls,
                  "longest_migrate_ms_client": round(report.longest_migrate * 1000, 3),
                  "longest_migrate_ms_server": round(server_us / 1000, 3)}, out)
            if len(done) >= slots:
                break
        emit({"benchmark": "cluster_faults", "part": "migrate_summary", "server": server, "commit": commit,
              "n": n, "partitions": store.explain().get("partitions"), "load_s": round(load_s, 1),
              "slots_moved": len(done), "largest_key_bytes": sizes[0][0] if sizes else 0,
              "worst_migrate_ms_client": round(worst_client * 1000, 3),
              "worst_migrate_ms_server": round(worst_server, 3)}, out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", action="append", choices=["recovery", "migrate"])
    ap.add_argument("--server", action="append")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--slots", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--bulk", action="store_true",
                    help="recovery: add a writer of map mset batches (200 keys a call): more in flight")
    args = ap.parse_args()
    servers = args.server or [s for s in ("valkey-9.1", "redis-7.0") if s in find_servers()]
    commit = gitstamp.commit()
    for part in args.part or ["recovery", "migrate"]:
        for server in servers:
            if part == "recovery":
                recovery(server, args.rounds, args.out, commit, (*KINDS, "bulk") if args.bulk else KINDS)
            else:
                migrate(server, args.n, args.slots, args.out, commit)


if __name__ == "__main__":
    main()
