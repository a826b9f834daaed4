"""A store written by the previous release (0.1: a split payload's rest in the partition's
separate continuation hash) is opened by this code (issue 30): every session reads back,
writes keep 0.1's format while its partitions are sized for one entry a session, and a
repartition under live traffic moves every split payload into its partition hash (one
HMGET per read), losing and misreading nothing.

The old sessions are written by the release itself: `git archive` of REFERENCE (the last
commit of 0.1's layout) run in a child process against the same server. Skipped where
the checkout has no git history (an sdist)."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from densekv.sessions import SessionStore
from densekv.sessions.layouts.partitioned import PartitionedLayout, cont_field
from densekv.sessions.model import digest_of
from tests.behaviour.monitored import commands_during, continuations

REFERENCE = "85afc8b"  # 0.1's session layout, the commit before the continuation field
REPO = Path(__file__).resolve().parents[2]
NS = "mig"

# Run by the 0.1 tree: writes sessions of every placement, prints {token: data}.
WRITER = r'''
import json, os, random, sys
import redis
import densekv
from densekv.sessions import SessionStore
from densekv.lab.session_profiles import session  # the 0.1 tree: its own path
assert densekv.__file__.startswith(sys.argv[2]), densekv.__file__
store = SessionStore(redis.Redis(port=int(sys.argv[1])), namespace="mig", expected_sessions=300, auto_train=None)
store.train_dictionary([session(p, i)[1] for p in ("P1", "P2", "P3") for i in range(200)])
rng = random.Random(30)
made = {}
for i in range(300):
    kind = i % 5
    if kind == 4:
        ident, data = i, {"blob": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(400))}
    else:
        ident, data = session(("P0", "P1", "P2", "P3")[kind], i)
    made[store.create(ident, data)] = data
stats = store.stats()
print(json.dumps({"made": made, "split": stats["split_sessions"], "ool": stats["out_of_line_sessions"],
                  "partitions": stats["partitions"]}))
'''


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        tar = subprocess.run(["git", "-C", str(REPO), "archive", REFERENCE, "densekv"],
                             capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip(f"no git history with commit {REFERENCE} in this checkout")
    tree = tmp_path_factory.mktemp("densekv-0.1")
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(tree, filter="data")
    return tree


def _write_with_0_1(tree: Path, port: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", WRITER, str(port), str(tree)], capture_output=True, env=env,
                          cwd=tree, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _where(client: redis.Redis, layout: PartitionedLayout) -> tuple[int, int]:
    return continuations(client, NS, layout.bits)


def test_a_0_1_store_reads_whole_then_moves_to_the_continuation_field_under_traffic(
        client: redis.Redis, server: Any, old_tree: Path) -> None:
    written = _write_with_0_1(old_tree, server.port)
    made: dict[str, Any] = written["made"]
    assert written["split"] > 30 and written["ool"] > 30  # every placement is there
    store = SessionStore(client, namespace=NS, expected_sessions=300).open()
    layout = store._core.layout
    assert isinstance(layout, PartitionedLayout) and not layout.here  # 0.1's partitions: 0.1's format
    assert _where(client, layout) == (0, written["split"])
    for token, data in made.items():  # every session reads as written
        got = store.get(token)
        assert got is not None and (got.data or {}) == (data or {})
    # writes keep the format while the partitions are 0.1's
    some = list(made)[:40]
    for t in some:
        made[t] = store.apply(t, {"seen": 1}, read=store.get(t))
    assert _where(client, layout)[0] == 0

    # live traffic during the repartition: each writer owns tokens and counts up in them;
    # readers check every session they read is one its writer wrote (never another's,
    # never torn, never going back)
    tokens = list(made)
    errors: list[str] = []
    stop = threading.Event()
    versions: dict[str, int] = dict.fromkeys(tokens, 0)

    def writer(mine: list[str]) -> None:
        s = SessionStore(redis.Redis(port=server.port), namespace=NS, expected_sessions=300).open()
        rng = random.Random(len(mine))
        while not stop.is_set():
            t = rng.choice(mine)
            got = s.get(t)
            if got is None:
                errors.append(f"lost {digest_of(t)!r}")
                return
            n = versions[t] + 1
            new = s.apply(t, {"v": n}, read=got)
            if new is None or new.get("v") != n:
                errors.append(f"apply gave {new!r}")
                return
            versions[t] = n
            made[t] = new

    def reader() -> None:
        s = SessionStore(redis.Redis(port=server.port), namespace=NS, expected_sessions=300).open()
        rng = random.Random(7)
        while not stop.is_set():
            t = rng.choice(tokens)
            floor = versions[t]
            got = s.get(t)
            if got is None:
                errors.append("a session read as gone")
                return
            data = got.data or {}
            if data.get("v", 0) < floor:
                errors.append("a session went back")
                return
            want = {k: v for k, v in (made[t] or {}).items() if k not in ("v", "seen")}
            if {k: v for k, v in data.items() if k not in ("v", "seen")} != want:
                errors.append("a session read with another's data")
                return

    threads = [threading.Thread(target=writer, args=(tokens[i::2],)) for i in range(2)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    try:
        for _ in range(200):  # traffic under way before the move (and after it: below)
            if sum(versions.values()) > 100 or errors:
                break
            threading.Event().wait(0.02)
        before = sum(versions.values())
        result = store.repartition(layout.partitions * 2)
        for _ in range(200):
            if sum(versions.values()) > before + 100 or errors:
                break
            threading.Event().wait(0.02)
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=60)
    assert not errors, errors[:5]
    assert result["partitions"] == layout.partitions * 2

    fresh = SessionStore(client, namespace=NS, expected_sessions=300).open()
    new_layout = fresh._core.layout
    assert isinstance(new_layout, PartitionedLayout) and new_layout.here
    for token, data in made.items():  # nothing lost, nothing misread
        got = fresh.get(token)
        assert got is not None and (got.data or {}) == (data or {})
    here, old = _where(client, new_layout)
    assert old == 0 and here == fresh.stats()["split_sessions"] > 30
    # a split session of the moved store: its rest beside it, read by one command
    split = next(t for t in made if (d := digest_of(t)) is not None and client.hexists(
        new_layout.hash_key(new_layout.locate(d)[0]), cont_field(new_layout.locate(d)[1], new_layout.bits)))
    fresh._core.payloads.split_rate, fresh._core.payloads.ool_rate = 1.0, 0.0  # as after reads of split sessions
    got: list[Any] = []
    seen = commands_during(client, lambda: got.append(fresh.get(split)))
    assert got[0] is not None
    reads = [c for c in seen if f"{NS}:" in c]
    assert len(reads) == 1 and reads[0].startswith("HMGET"), reads
