"""The `densekv` command given what a new user types by mistake (issue 17, "CLI surprises").

A bad port, a bad count, a wrong password or an unsuitable database: exit 2, one line
that says what to do, no password echoed, and nothing changed (no key written, no
server started, no temporary directory left). Most cases fail in click's parsing, so they
run in-process through densekv's own main(); the ones that need a real process (server
start, the temp directory) run as subprocesses.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import redis

from densekv.errors import InvalidArgument
from densekv.tools.cli import main
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

DEAD = "redis://127.0.0.1:1/0"  # never contacted: every case below fails before connecting


def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`densekv ARGS` in this process: (exit code, stdout + stderr)."""
    monkeypatch.setattr(sys, "argv", ["densekv", *args])
    try:
        main()
        code: object = 0
    except SystemExit as done:
        code = done.code
    out = capsys.readouterr()
    return (code if isinstance(code, int) else 1), out.out + out.err


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "densekv.tools.cli", *args], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, **(env or {})})


def assert_one_line_exit_2(code: int, text: str) -> str:
    """The one line of a CLI mistake (exit 2, no traceback, no "internal error")."""
    assert code == 2, text
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("densekv: "), text
    assert "internal error" not in text and "Traceback" not in text, text
    return lines[0]


def keys_of(client: redis.Redis) -> dict[bytes, bytes | None]:
    """Every key and its DUMP: "changes nothing" compared value by value."""
    return {k: client.dump(k) for k in client.scan_iter(count=1000)}


# --- bad ports ------------------------------------------------------------------------


def test_out_of_range_ports_exit_2_and_leave_no_directory(tmp_path: Path) -> None:
    env = {"TMPDIR": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "state")}
    for args in (["probe", "--url", "redis://127.0.0.1:99999"], ["server", "start", "--port", "70000"],
                 ["server", "start", "--port", "-1"], ["probe", "--url", "redis://:wrong-secret@127.0.0.1:99999"]):
        out = run(*args, env=env)
        assert_one_line_exit_2(out.returncode, out.stdout + out.stderr)
        assert "1 to 65535" in out.stderr or "1<=x<=65535" in out.stderr
        assert "wrong-secret" not in out.stderr
    assert list(tmp_path.iterdir()) == []  # no densekv-* directory, no server.json


def test_a_server_process_refuses_a_bad_port_before_making_its_directory(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    binary = find_servers()["valkey-9.1"]
    for port in (70000, -1, 65536):
        with pytest.raises(InvalidArgument, match="1-65535"):
            ServerProcess(binary, port=port)
    assert list(tmp_path.iterdir()) == []


# --- bad counts, bad URLs: refused by click before anything runs --------------------------

BAD_ARGS = [
    ["sweep", "--url", DEAD, "--max-items", "0"],
    ["sweep", "--url", DEAD, "--max-items", "-5"],
    ["sweep", "--url", DEAD, "--max-items", str(10**30)],
    ["sweep", "--url", DEAD, "--every", "0"],
    ["sweep", "--url", DEAD, "--every", "-1"],
    ["sweep", "--url", DEAD, "--every", "1", "--count", "0"],
    ["sweep", "--url", DEAD, "--expected-sessions", "0"],
    ["sweep", "--url", DEAD, "--partitions", "12"],
    ["sweep", "--url", DEAD, "--layout", "nope"],
    ["sweep", "--max-items", "0"],  # no --url: would have started an embedded server
    ["repartition", "--url", DEAD, "--partitions", "0"],
    ["repartition", "--url", DEAD, "--partitions", "-64"],
    ["repartition", "--url", DEAD, "--partitions", "1000"],
    ["repartition", "--url", DEAD, "--partitions", str(2**40)],
    ["repartition", "--url", DEAD, "--partitions", "many"],
    ["migrate", "--url", DEAD, "--namespace", "m", "--pattern", "u:*", "--batch", "0"],
    ["migrate", "--url", DEAD, "--namespace", "m", "--pattern", "u:*", "--batch", "-1"],
    ["migrate", "--url", DEAD, "--namespace", "m", "--pattern", "u:*", "--expected", "0"],
    ["migrate", "--url", DEAD, "--namespace", "m", "--pattern", "u:*", "--pause", "-1"],
    ["migrate", "--url", DEAD, "--namespace", "m"],  # nothing to do: no --pattern
    ["migrate", "--url", "redis://127.0.0.1:99999", "--namespace", "m", "--pattern", "u:*"],
    ["analyze", "--url", DEAD, "--sample", "0"],
    ["analyze", "--url", DEAD, "--sample", "-3"],
    ["analyze", "--url", DEAD, "--rate", "0"],
    ["analyze", "--url", DEAD, "--replay-keys", "-1"],
    ["analyze", "--url", "redis://:wrong-secret@127.0.0.1:70000/0"],
    ["analyze", "--url", DEAD, "--scratch", "redis-2.8"],
    ["analyze", "--url", DEAD, "--resume", "/nonexistent-densekv-dir/state.json"],
    ["migrate", "--url", DEAD, "--namespace", "bad name", "--pattern", "u:*"],
    ["migrate", "--url", DEAD, "--namespace", "m", "--pattern", "u:*", "--codec", "gzip"],
    ["lab", "--url", "redis://127.0.0.1:99999/15"],
    ["lab", "--url", DEAD, "--n", str(10**15)],
    ["probe", "--url", "redis://127.0.0.1:6379/abc"],
    ["probe", "--url", "redis://:wrong-secret@/0"],
    ["server", "start", "--port", "0"],
    ["server", "start", "--port", "port"],
]


@pytest.mark.parametrize("args", BAD_ARGS, ids=[" ".join(a[:1] + a[3:]) for a in BAD_ARGS])
def test_a_bad_argument_is_one_line_and_exit_2(args: list[str], monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("DENSEKV_URL", raising=False)
    code, text = run_main(monkeypatch, capsys, *args)
    assert_one_line_exit_2(code, text)
    assert "wrong-secret" not in text
    assert "leave out --url" not in text


# --- repartition: only a larger power of two --------------------------------------------


def test_repartition_refuses_a_smaller_or_odd_count_and_changes_nothing(
        client: redis.Redis, server: ServerProcess, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from densekv.sessions import SessionStore

    store = SessionStore(client, layout="dense", partitions=16)
    tokens = store.create_many(range(200))
    before = keys_of(client)
    code, text = run_main(monkeypatch, capsys, "repartition", "--url", server.url, "--partitions", "8")
    assert_one_line_exit_2(code, text)
    assert "has 16" in text and "from 32 to 4096" in text
    code, text = run_main(monkeypatch, capsys, "repartition", "--url", server.url, "--partitions", "1000")
    assert_one_line_exit_2(code, text)
    assert "power of two" in text
    with pytest.raises(InvalidArgument, match="only grows"):
        store.repartition(8)
    with pytest.raises(InvalidArgument, match="power of two"):
        store.repartition(48)
    assert keys_of(client) == before
    assert store.explain()["partitions"] == 16 and all(store.get(t) for t in tokens)
    code, text = run_main(monkeypatch, capsys, "repartition", "--url", server.url, "--partitions", "16")
    assert code == 0 and "16 -> 16" in text  # a rerun after it finished: nothing to do
    assert keys_of(client) == before


# --- sweep and repartition on a database without a session store ------------------------


@pytest.mark.parametrize("command", [["sweep"], ["repartition", "--partitions", "64"]])
@pytest.mark.parametrize("meta", ["none", "list", "foreign hash"])
def test_a_database_without_a_store_is_exit_2_and_untouched(
        command: list[str], meta: str, client: redis.Redis, server: ServerProcess,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    client.mset({f"user:{i}": i for i in range(100)})  # somebody else's data
    if meta == "list":
        client.rpush("sess:meta", "x")
    elif meta == "foreign hash":
        client.hset("sess:meta", mapping={"owner": "another app"})
    before = keys_of(client)
    code, text = run_main(monkeypatch, capsys, command[0], "--url", server.url, *command[1:])
    assert_one_line_exit_2(code, text)
    assert "--namespace" in text or "namespace" in text
    assert keys_of(client) == before


# --- migrate ---------------------------------------------------------------------------


def test_migrate_a_dead_url_does_not_suggest_leaving_out_url(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run_main(monkeypatch, capsys, "migrate", "--url", DEAD, "--namespace", "m", "--pattern", "u:*")
    assert_one_line_exit_2(code, text)
    assert "nothing answers" in text and "leave out --url" not in text and "--url" in text


@pytest.mark.parametrize("args,meta", [(["--reverse"], None), (["--verify"], None),
                                       (["--pattern", "user:*"], "string"), (["--pattern", "user:*"], "hash")])
def test_migrate_into_an_unsuitable_namespace_is_exit_2_and_untouched(
        args: list[str], meta: str | None, client: redis.Redis, server: ServerProcess,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from densekv.maps.meta import meta_key

    client.mset({f"user:{i}": i for i in range(50)})
    if meta == "string":
        client.set(meta_key("m"), "not a map")
    elif meta == "hash":
        client.hset(meta_key("m"), mapping={"owner": "another app"})
    before = keys_of(client)
    code, text = run_main(monkeypatch, capsys, "migrate", "--url", server.url, "--namespace", "m", *args)
    assert_one_line_exit_2(code, text)
    assert keys_of(client) == before


# --- servers ---------------------------------------------------------------------------


def test_servers_never_points_into_site_packages(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import densekv.tools.cli as cli_module

    fake = tmp_path / "lib" / "python3.11" / "site-packages" / ".servers"  # an installed densekv
    monkeypatch.delenv("DENSEKV_SERVERS", raising=False)
    monkeypatch.setattr(cli_module, "servers_dir", lambda: fake)
    monkeypatch.setattr(cli_module, "find_servers", lambda: {"valkey-9.1": find_servers()["valkey-9.1"]})
    code, text = run_main(monkeypatch, capsys, "servers")
    assert code == 0
    missing = [line for line in text.splitlines() if "missing" in line]
    assert len(missing) == 3
    assert all("site-packages" not in line and "scripts/get-servers" in line and "DENSEKV_SERVERS" in line
               for line in missing), text


# --- a wrong password, every command that takes --url -----------------------------------


def test_a_wrong_password_is_exit_2_for_every_command(fresh_server: Any, server_name: str) -> None:
    proc = fresh_server(server_name, options={"requirepass": "right-one"})
    url = f"redis://:wrong-secret@127.0.0.1:{proc.port}/0"
    before = proc.client().dbsize()
    for args in (["probe"], ["sweep"], ["repartition", "--partitions", "64"],
                 ["migrate", "--namespace", "m", "--pattern", "u:*"], ["analyze", "--no-replay"],
                 ["lab", "--only", "sessions"]):
        out = run(args[0], "--url", url, *args[1:])
        assert_one_line_exit_2(out.returncode, out.stdout + out.stderr)
        assert "refused the credentials" in out.stderr
        assert "wrong-secret" not in out.stderr and "right-one" not in out.stderr
    assert proc.client().dbsize() == before
