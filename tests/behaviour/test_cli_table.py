"""Every `densekv` command given what goes wrong most (issue 23, section 2): garbage
arguments, a URL where nothing answers, a wrong password, and a `redis+cluster://` URL of
a server that is not a cluster. Each is one line on stderr naming the problem and what
to do, exit 2, never a traceback or an "internal error", never the password.

A URL nothing usable answers at gets one line by its cause (issue 32, part 4), on real
local sockets: a port that accepts and never answers (the timeout, its seconds and the
variable that sets them), a tiny HTTP responder (not a Redis server: an HTTP server), a
name that does not resolve, and a closed port (the connection refused).

The commands run in this process through densekv's own main() (as `densekv ...` runs
them; a subprocess each would cost a second of imports per row), against real servers
started once for the module: a plain valkey and one with a password.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess, free_port
from tests.behaviour.test_cli_input import assert_one_line_exit_2, run_main

SECRET = "wrong-secret-23"

#: every command and subcommand, with the arguments it needs besides --url
COMMANDS: dict[str, list[str]] = {
    "probe": ["probe"],
    "sweep": ["sweep"],
    "repartition": ["repartition", "--partitions", "64"],
    "migrate": ["migrate", "--namespace", "m", "--pattern", "u:*"],
    "analyze": ["analyze", "--no-replay"],
    "lab": ["lab", "--only", "maps", "--n", "100"],
    "plan": ["plan", "--kind", "set", "--items", "1000"],
    "plan --verify": ["plan", "--kind", "set", "--items", "1000", "--verify"],
}
#: the commands that take no --url: garbage only
NO_URL: dict[str, list[str]] = {
    "servers": ["servers"],
    "server start": ["server", "start"],
    "server stop": ["server", "stop"],
    "server status": ["server", "status"],
}
#: garbage per command: an option it does not have, a value of the wrong kind, a stray argument
GARBAGE: dict[str, list[list[str]]] = {
    **{name: [["--no-such-option"], ["--url", "garbage://x"], ["--url", "redis://127.0.0.1:99999/0"], ["--url"],
              ["stray"]]
       for name in COMMANDS},
    "plan --verify": [["--url", "garbage://x"]],
    "plan": [["--no-such-option"], ["--url", "garbage://x"], ["--kind", "queue"], ["--items", "-1"],
             ["--server", "redis-2.8"], ["--masters", "0"], ["--url"],
             ["--kind", "sessions", "--sample", "no-such-sample.jsonl"], ["--sample", "x.jsonl"]],
    "servers": [["--no-such-option"], ["stray"]],
    "server start": [["--no-such-option"], ["--port", "port"], ["--server", "redis-2.8"], ["stray"]],
    "server stop": [["--no-such-option"], ["stray"]],
    "server status": [["--no-such-option"], ["stray"]],
}
CASES = ["dead url", "wrong password", "not a cluster"]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ServerProcess]]:
    """A plain valkey-9.1 (not a cluster) and one that wants a password."""
    binary = find_servers()["valkey-9.1"]
    plain = ServerProcess(binary).start()
    locked = ServerProcess(binary, options={"requirepass": "right-one"}).start()
    try:
        yield {"plain": plain, "locked": locked}
    finally:
        plain.stop()
        locked.stop()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.mktemp("cli-table")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base / "state"))
    monkeypatch.setenv("DENSEKV_CACHE_DIR", str(base / "cache"))
    monkeypatch.delenv("DENSEKV_URL", raising=False)
    monkeypatch.chdir(base)  # the lab's default --out


GARBAGE_ROWS = [(name, args) for name, rows in GARBAGE.items() for args in rows]


@pytest.mark.parametrize(("name", "extra"), GARBAGE_ROWS, ids=[f"{n} {' '.join(a)}" for n, a in GARBAGE_ROWS])
def test_garbage_is_one_line_and_exit_2(name: str, extra: list[str], monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    command = COMMANDS.get(name) or NO_URL[name]
    started = time.monotonic()
    code, text = run_main(monkeypatch, capsys, *command, *extra)
    line = assert_one_line_exit_2(code, text)
    assert time.monotonic() - started < 5, "refused at once, before any server was started"
    if extra[0] in ("--no-such-option", "stray"):
        assert "--help" in line  # what to do: the options there are
    if extra[0] == "--server":
        assert "choose one of" in line and "valkey-9.1" in line


def _dbsize(proc: ServerProcess) -> int:
    with proc.client() as client:
        return int(client.dbsize())


URL_ROWS = [(name, case) for name in COMMANDS for case in CASES]


@pytest.mark.parametrize(("name", "case"), URL_ROWS, ids=[f"{n}: {c}" for n, c in URL_ROWS])
def test_a_url_that_cannot_be_used_is_one_line_and_exit_2(
        name: str, case: str, servers: dict[str, ServerProcess], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    plain, locked = servers["plain"], servers["locked"]
    url = {"dead url": f"redis://127.0.0.1:{free_port()}/0",
           "wrong password": f"redis://:{SECRET}@127.0.0.1:{locked.port}/0",
           "not a cluster": f"redis+cluster://127.0.0.1:{plain.port}/0"}[case]
    before = {p: _dbsize(p) for p in (plain, locked)}
    started = time.monotonic()
    code, text = run_main(monkeypatch, capsys, *COMMANDS[name], "--url", url)
    line = assert_one_line_exit_2(code, text)
    assert time.monotonic() - started < 15, "checked before any long work"
    assert SECRET not in text and "right-one" not in text
    expected = {"dead url": "nothing answers", "wrong password": "refused the credentials",
                "not a cluster": "is not a cluster"}[case]
    assert expected in line, line
    if case == "not a cluster":
        assert "redis://" in line  # what to do: the plain URL scheme
    assert {p: _dbsize(p) for p in (plain, locked)} == before


# --- why nothing usable answers (issue 32) ------------------------------------------------

CAUSES = {"silent port": "accepted the connection but sent no reply within 1 s",
          "http server": "is not a Redis server: an HTTP server (it answered 'HTTP/1.1 400 Bad Request')",
          "no such host": "the host name 'nosuchhost.invalid' of redis://nosuchhost.invalid:6379/0 does not resolve",
          "closed port": "the connection was refused"}


def _http_reply(conn: socket.socket) -> None:
    try:
        conn.recv(1024)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    except OSError:
        pass


@pytest.fixture(scope="module")
def sockets() -> Iterator[dict[str, int]]:
    """Ports of a listener that accepts and never answers, and of a tiny HTTP responder."""
    listeners, accepted = [], []

    def serve(handler: object) -> int:
        sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        listeners.append(sock)

        def loop() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                accepted.append(conn)  # held open: the silent port never closes on its own
                if callable(handler):
                    handler(conn)

        threading.Thread(target=loop, daemon=True).start()
        return int(sock.getsockname()[1])

    ports = {"silent port": serve(None), "http server": serve(_http_reply)}
    yield ports
    for sock in listeners + accepted:
        sock.close()


CAUSE_ROWS = [(name, cause) for name in COMMANDS for cause in CAUSES]


@pytest.mark.parametrize(("name", "cause"), CAUSE_ROWS, ids=[f"{n}: {c}" for n, c in CAUSE_ROWS])
def test_why_nothing_usable_answers_is_one_line_by_cause(
        name: str, cause: str, sockets: dict[str, int], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DENSEKV_CONNECT_TIMEOUT", "1")
    url = {"silent port": f"redis://127.0.0.1:{sockets['silent port']}/0",
           "http server": f"redis://127.0.0.1:{sockets['http server']}/0",
           "no such host": "redis://nosuchhost.invalid:6379/0",
           "closed port": f"redis://127.0.0.1:{free_port()}/0"}[cause]
    started = time.monotonic()
    code, text = run_main(monkeypatch, capsys, *COMMANDS[name], "--url", url)
    line = assert_one_line_exit_2(code, text)
    assert time.monotonic() - started < 10
    assert CAUSES[cause] in line, line
    assert [c for c in CAUSES if CAUSES[c] in line] == [cause]  # four different lines
    if cause == "silent port":
        assert "DENSEKV_CONNECT_TIMEOUT" in line


def test_a_silent_port_fails_in_seconds_by_default(sockets: dict[str, int], monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Without the variable: FIRST_REPLY (5 s), not the 30 s a later reply may take."""
    monkeypatch.delenv("DENSEKV_CONNECT_TIMEOUT", raising=False)
    started = time.monotonic()
    code, text = run_main(monkeypatch, capsys, "probe", "--url", f"redis://127.0.0.1:{sockets['silent port']}/0")
    line = assert_one_line_exit_2(code, text)
    assert "within 5 s" in line and time.monotonic() - started < 9


def test_a_bad_timeout_variable_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                            servers: dict[str, ServerProcess]) -> None:
    monkeypatch.setenv("DENSEKV_CONNECT_TIMEOUT", "soon")
    code, text = run_main(monkeypatch, capsys, "probe", "--url", servers["plain"].url)
    assert "DENSEKV_CONNECT_TIMEOUT='soon' is not a number of seconds" in assert_one_line_exit_2(code, text)
