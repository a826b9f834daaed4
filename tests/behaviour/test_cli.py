"""The `densekv` command as a user runs it: real processes, one-line errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from densekv.server.process import ServerProcess, free_port


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "densekv.cli", *args],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **(env or {})},
    )


def test_probe_json_on_the_embedded_server() -> None:
    out = run("probe", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["flavor"] == "valkey" and data["field_ttl_encoding"] == "hashtable"


def test_probe_with_url(server: ServerProcess, server_name: str) -> None:
    out = run("probe", "--url", server.url, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["version"] == server.binary.version


@pytest.mark.parametrize(
    "args,message",
    [
        (["probe", "--url", f"redis://127.0.0.1:{free_port()}"], "nothing answers"),
        (["probe", "--url", "http://example"], "not a redis:// URL"),
        (["probe", "--server", "redis-2.8"], "choose one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    out = run(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_missing_matrix_server_says_how_to_get_it(tmp_path: Path) -> None:
    out = run("probe", "--server", "redis-7.0", env={"DENSEKV_SERVERS": str(tmp_path)})
    assert out.returncode == 2 and "scripts/get-servers" in out.stderr


def test_port_in_use_is_exit_2(server: ServerProcess) -> None:
    out = run("server", "start", "--port", str(server.port), env={"XDG_RUNTIME_DIR": "/tmp/densekv-test-state"})
    assert out.returncode == 2 and "in use" in out.stderr


def test_server_start_status_stop(tmp_path: Path) -> None:
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    started = run("server", "start", env=env)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    try:
        assert run("server", "status", env=env).stdout.strip() == url
        assert json.loads(run("probe", "--url", url, "--json").stdout)["flavor"] == "valkey"
        again = run("server", "start", env=env)
        assert again.stdout.strip() == url and "already running" in again.stderr
    finally:
        stopped = run("server", "stop", env=env)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert run("probe", "--url", url).returncode == 2


def test_servers_lists_the_matrix() -> None:
    out = run("servers", "--json")
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["valkey-9.1"]["present"] is True
    # the matrix always, the newer trixie servers only where get-servers fetched them
    assert {"redis-7.0", "redis-7.4", "valkey-8.0", "valkey-9.1"} <= set(rows)
    assert set(rows) <= {"redis-7.0", "redis-7.4", "redis-8.0", "valkey-8.0", "valkey-8.1", "valkey-9.1"}
    assert all(rows[n]["present"] for n in set(rows) & {"redis-8.0", "valkey-8.1"})


def test_sweep_command_removes_expired_sessions(server: ServerProcess) -> None:
    from densekv.sessions import SessionStore

    client = server.client()
    client.flushall()
    store = SessionStore(client, layout="dense", ttl=1, expected_sessions=1000)
    store.create_many(range(300))
    keep = SessionStore(client, layout="dense", ttl=3600, expected_sessions=1000).create(1)
    import time

    time.sleep(2.1)
    out = run("sweep", "--url", server.url, "--layout", "dense", "--expected-sessions", "1000")
    assert out.returncode == 0, out.stderr
    assert "swept 300 expired sessions" in out.stdout
    assert store.get(keep) is not None and store.count() == 1


def test_repartition_command_grows_a_store_and_refuses_a_missing_one(server: ServerProcess) -> None:
    from densekv.sessions import SessionStore

    client = server.client()
    client.flushall()
    store = SessionStore(client, layout="dense", partitions=16)
    tokens = store.create_many(range(500))
    out = run("repartition", "--url", server.url, "--partitions", "64", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"partitions": 64, "moved": 500, "from": 16}
    assert all(store.get(t) is not None for t in tokens)  # the old store object follows
    assert store.explain()["partitions"] == 64
    missing = run("repartition", "--url", server.url, "--namespace", "nope", "--partitions", "64")
    assert missing.returncode != 0 and "no session store in namespace 'nope'" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = run("repartition", "--url", server.url, "--partitions", "100")
    assert bad.returncode == 2 and "power of two" in bad.stderr


def test_a_wrong_password_is_named_and_never_echoed(fresh_server: Any, server_name: str) -> None:
    import densekv
    from densekv.errors import ServerUnavailable

    proc = fresh_server(server_name, options={"requirepass": "right-one"})
    for url, says in ((f"redis://:wrong-secret@127.0.0.1:{proc.port}/0", "refused the credentials"),
                      (f"redis://127.0.0.1:{proc.port}/0", "refused the credentials")):
        with pytest.raises(ServerUnavailable, match=says) as caught:
            densekv.connect(url)
        assert "wrong-secret" not in str(caught.value) and "right-one" not in str(caught.value)
    densekv.connect(f"redis://:right-one@127.0.0.1:{proc.port}/0").close()
    assert proc.client().ping()  # what densekv starts, it can talk to


def test_an_embedded_server_with_a_password_starts_and_answers() -> None:
    import densekv

    with densekv.embedded(options={"requirepass": "s3cret"}) as srv:
        assert srv.client().ping()
        assert densekv.connect(srv.url).ping()
