"""The lab on real servers: what it writes, that its numbers hold, and that it leaves a
user's server alone (their keys, their config)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from densekv.errors import LabRefused
from densekv.sessions import SessionStore
from densekv.tools.lab.experiments.base import Context
from densekv.tools.lab.experiments.sessions import Sessions
from densekv.tools.lab.results import validate
from densekv.tools.lab.runner import LabConfig, run_lab
from densekv.tools.lab.target import scratch_target
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

SMALL = {"keys": 2, "top": 600, "structures": ("hash", "set")}
#: The agreement check runs on the embedded server and on one jemalloc server (the meter
#: itself is checked on the whole matrix in test_meter.py).
PRESENT = find_servers()
_WANTED = os.environ.get("DENSEKV_TEST_SERVERS", "valkey-9.1,redis-7.4").split(",")
AGREEMENT_SERVERS = [name for name in ("valkey-9.1", "redis-7.4") if name in PRESENT and name in _WANTED]


@pytest.fixture(scope="module")
def own_server() -> Iterator[ServerProcess]:
    """A valkey-9.1 playing the user's server for the --url tests (which do not depend
    on the server's kind: the target rules are the lab's own)."""
    with ServerProcess(PRESENT["valkey-9.1"]) as proc:
        yield proc


@pytest.fixture
def user(own_server: ServerProcess) -> Iterator[redis.Redis]:
    c = own_server.client()
    c.execute_command("FLUSHALL", "SYNC")
    yield c
    c.close()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "densekv.tools.lab", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ}, check=False)


def test_a_tiny_lab_on_the_embedded_server_writes_results_and_report(tmp_path: Path) -> None:
    config = LabConfig(n=2000, out=tmp_path, only=("sessions", "small_sets", "matrix"), options={
        "sessions": {"layouts": ("dense", "json", "zset seed 65k"), "per_decade": 2, "gets": 500}, "small_sets": SMALL})
    run = run_lab(config)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert validate(doc) == []
    status = {e["kind"]: e["status"] for e in doc["experiments"]}
    assert status == {"sessions": "ran", "small_sets": "ran", "matrix": "ran"}  # sets, maps: own tests
    assert doc["servers"][0]["name"] == "valkey-9.1" and doc["servers"][0]["scratch"] is True
    sessions = {r["variant"]: r for r in doc["runs"] if r["kind"] == "sessions"}
    assert set(sessions) == {"dense", "json", "zset seed 65k"}
    dense = sessions["dense"]
    assert dense["n"] == 2000 and dense["points"][-1]["n"] == 2000 and len(dense["points"]) >= 2
    assert dense["bytes_per_item"] < sessions["json"]["bytes_per_item"]
    assert dense["ops"]["get"]["found"] == 500 and dense["server_usec_per_call"] > 0
    assert all("encodings" in p for p in dense["points"])
    small = [r for r in doc["runs"] if r["kind"] == "small_sets"]
    assert {(r["layout"], r["params"]["config"]) for r in small} == {
        ("hash", "default"), ("set", "default"), ("hash", "raised"), ("set", "raised")}
    # the default-limit hash left its listpack past hash-max-listpack-entries, the raised one did not
    for r in small:
        if r["layout"] == "hash":
            last = r["points"][-1]["encodings"]["hash"]
            assert last == ({"hashtable": 1} if r["params"]["config"] == "default" else {"listpack": 1})
    html = (tmp_path / "report.html").read_text()
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(images) == len(list(tmp_path.glob("*.png"))) >= 4
    assert not re.search(r"(src|href)=['\"]https?:", html)  # self-contained
    assert "<td>libc</td>" in html  # the servers table states the allocator once
    assert html.count("Measured on valkey-9.1") <= len(doc["experiments"])  # once per section at most
    assert f"{dense['bytes_per_item']:,.2f}" in html  # the table shows this run's number
    # the first screen answers what to do: the summary comes before any experiment's details
    todo, details = html.index("What to do on your server"), html.index("How it was measured")
    assert todo < details and f"{dense['bytes_per_item']:,.1f}" in html[todo:details]
    assert html.count("class=note") <= len(doc["experiments"])  # at most one note per output
    assert run.failed == []


def _plain_delta(proc: ServerProcess, n: int, partitions: int) -> float:
    """The naive but honest reference: fresh server, one reading before, one after."""
    client = proc.client()
    store = SessionStore(client, namespace="ref", layout="dense", expected_sessions=n,
                         index_identities=False, partitions=partitions).open()
    time.sleep(0.5)  # the store's probe (a scratch key, then deleted) is not session data
    before = client.info("memory")["used_memory"]
    for lo in range(0, n, 2000):
        store.create_many(range(lo, min(n, lo + 2000)), batch=2000)
    client.close()
    client = proc.client()
    time.sleep(1.5)  # let rehashing and client-buffer shrinking finish
    after = client.info("memory")["used_memory"]
    client.close()
    return float(after - before) / n


@pytest.mark.parametrize("server_name", AGREEMENT_SERVERS)
def test_dense_bytes_per_session_agree_with_a_plain_delta(
    fresh_server: Callable[..., ServerProcess], server_name: str
) -> None:
    n = 50_000
    proc = fresh_server(server_name)
    with scratch_target(proc.binary) as target:  # the lab's own server; the reference gets a fresh one
        out = Sessions().run(Context(target, n, options={"layouts": ("dense",), "per_decade": 1, "gets": 100}))
    record = out.records[0]
    reference = _plain_delta(proc, n, record.partitions)  # type: ignore[arg-type]
    assert record.bytes_per_item is not None
    assert abs(record.bytes_per_item - reference) / reference < 0.05, (record.bytes_per_item, reference)


def test_url_to_a_database_with_foreign_keys_is_refused_untouched(client: redis.Redis, server: ServerProcess,
                                                                  tmp_path: Path) -> None:
    client.set("users-precious-key", "1")
    client.hset("users-hash", "f", "v")
    before = client.info("commandstats").get("cmdstat_flushdb", {}).get("calls", 0)
    with pytest.raises(LabRefused, match=r"holds 2 keys.*db \d+ is empty"):
        run_lab(LabConfig(url=server.url, n=1000, out=tmp_path, only=("sessions",)))
    assert client.get("users-precious-key") == b"1" and client.hget("users-hash", "f") == b"v"
    assert client.info("commandstats").get("cmdstat_flushdb", {}).get("calls", 0) == before
    assert not (tmp_path / "results.json").exists()


def test_url_lab_uses_its_empty_db_and_never_configures_without_allow_config(
    user: redis.Redis, own_server: ServerProcess, tmp_path: Path
) -> None:
    client, server = user, own_server
    client.set("users-precious-key", "1")  # db 0: not the lab's
    config_before = client.config_get("*max*entries*")
    sets_before = client.info("commandstats").get("cmdstat_config|set", {}).get("calls", 0)
    url = server.url.rsplit("/", 1)[0] + "/9"
    run = run_lab(LabConfig(url=url, n=1000, out=tmp_path, only=("small_sets",),
                            options={"small_sets": {**SMALL, "structures": ("hash",)}}))
    assert client.get("users-precious-key") == b"1"
    assert client.config_get("*max*entries*") == config_before
    assert client.info("commandstats").get("cmdstat_config|set", {}).get("calls", 0) == sets_before
    with redis.Redis(host="127.0.0.1", port=server.port, db=9) as lab_db:
        assert lab_db.dbsize() == 0  # left as found
    records = run.doc["runs"]
    assert {r["server"] for r in records if r["params"]["config"] == "default"} == {"url"}
    raised = [r for r in records if r["params"]["config"] == "raised"]
    assert raised and all(r["server"] == "valkey-9.1" for r in raised)  # a scratch server the lab started
    notes = [n for e in run.doc["experiments"] for n in e["notes"]]
    assert len(notes) == 1 and "needs --allow-config" in notes[0] and "budget" not in notes[0]


def test_allow_config_configures_the_url_server_and_restores_it(user: redis.Redis, own_server: ServerProcess,
                                                                tmp_path: Path) -> None:
    client, server = user, own_server
    config_before = client.config_get("*max*entries*")
    url = server.url.rsplit("/", 1)[0] + "/9"
    run = run_lab(LabConfig(url=url, n=1000, out=tmp_path, only=("small_sets",), allow_config=True,
                            options={"small_sets": {**SMALL, "structures": ("hash",)}}))
    assert client.config_get("*max*entries*") == config_before
    raised = [r for r in run.doc["runs"] if r["params"]["config"] == "raised"]
    assert raised and raised[0]["server"] == "url"
    limit = config_before["hash-max-listpack-entries"]
    assert raised[0]["config"]["hash_max_listpack_entries"] == 4 * int(limit)


@pytest.mark.parametrize("args,message", [
    (["--url", "redis://127.0.0.1:1/0", "--server", "valkey-9.1"], "not both"),
    (["--only", "sessions,nonsense"], "unknown experiment 'nonsense'"),
    (["--n", "5"], "--n is at least"),
    (["--server", "redis-2.8"], "unknown server"),
])
def test_bad_options_are_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    out = run_cli(*args, "--out", str(tmp_path))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_refuses_a_url_with_data_in_one_line(user: redis.Redis, own_server: ServerProcess,
                                                tmp_path: Path) -> None:
    client, server = user, own_server
    client.set("k", "v")
    out = run_cli("--url", server.url, "--out", str(tmp_path))
    assert out.returncode == 2 and "holds 1 keys" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and client.get("k") == b"v"
