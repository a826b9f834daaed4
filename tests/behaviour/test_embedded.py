"""The embedded server and the cluster fixture start, answer, and leave nothing behind."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import densekv
from densekv.errors import BinaryMissing, PortInUse, ServerStartFailed
from densekv.tools.server.binaries import NEWER, ServerBinary, find_servers
from densekv.tools.server.process import ServerProcess, pid_alive


def test_embedded_answers_and_cleans_up() -> None:
    with densekv.embedded() as srv:
        client = srv.client()
        assert client.ping()
        assert srv.url.startswith("redis://127.0.0.1:")
        assert client.config_get("save")["save"] == ""
        assert client.config_get("appendonly")["appendonly"] == "no"
        proc = srv.process
        assert proc is not None and proc.proc is not None
        pid, workdir = proc.proc.pid, proc.dir
        client.close()
    assert not pid_alive(pid)
    assert not workdir.exists()


def test_embedded_cleans_up_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), densekv.embedded() as srv:
        assert srv.process is not None and srv.process.proc is not None
        pid, workdir = srv.process.proc.pid, srv.process.dir
        raise RuntimeError("boom")
    assert not pid_alive(pid)
    assert not workdir.exists()


def test_server_dies_with_a_parent_that_is_killed(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import os, densekv
        cm = densekv.embedded()
        srv = cm.__enter__()
        print(srv.process.proc.pid, srv.process.dir, flush=True)
        os._exit(0)   # no atexit, no context exit: only PDEATHSIG can stop the server
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    pid_text, workdir = out.stdout.split()
    pid = int(pid_text)
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(pid)
    import shutil

    shutil.rmtree(workdir, ignore_errors=True)  # a hard kill cannot run cleanup code


def test_port_in_use_is_a_clear_error() -> None:
    with densekv.embedded() as srv:
        assert srv.process is not None
        with pytest.raises(PortInUse, match="in use"), densekv.embedded(port=srv.process.port):
            pass


def test_unknown_server_name_says_what_exists() -> None:
    with pytest.raises(BinaryMissing, match="choose one of"), densekv.embedded("redis-2.8"):
        pass


def test_a_newer_server_not_fetched_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DENSEKV_SERVERS", str(tmp_path))  # an empty .servers
    with pytest.raises(BinaryMissing, match=r"get-servers --all"), densekv.embedded("redis-8.0"):
        pass


NEWER_PRESENT = [name for name in NEWER if name in find_servers()]


@pytest.mark.skipif(not NEWER_PRESENT, reason="no newer server here (scripts/get-servers --all)")
@pytest.mark.parametrize("name", NEWER_PRESENT)
def test_a_trixie_server_runs_on_its_own_loader_and_libraries(name: str) -> None:
    # redis-8.0 and valkey-8.1 come from Debian trixie (glibc 2.41) and run on any older
    # host through their own dynamic loader: every shared object the running server has
    # mapped is one of the files beside it, none of the host's.
    binary = find_servers()[name]
    libdir = (binary.path.parent / "lib").resolve()
    with densekv.embedded(name) as srv:
        assert srv.process is not None and srv.process.proc is not None
        pid = srv.process.proc.pid
        mapped = {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
                  if ".so" in line.split()[-1]}
        assert str(libdir / "libc.so.6") in mapped and str(libdir / "ld-linux-x86-64.so.2") in mapped
        assert all(path.startswith(f"{libdir}/") for path in mapped), sorted(mapped)
        info = srv.client().info("server")
        assert str(info.get("valkey_version") or info["redis_version"]) == binary.version
        # The server saw the argv[0] the wrapper gave it (it picks its mode from that name).
        assert info["executable"].endswith(f"/bin/{binary.flavor}-server") and info["process_id"] == pid


def test_broken_binary_is_a_clear_error(tmp_path: Path) -> None:
    fake = tmp_path / "server"
    fake.write_text("#!/bin/sh\necho 'FATAL: broken build' >&2\nexit 3\n")
    fake.chmod(0o755)
    binary = ServerBinary("fake", fake, "redis", "0", "libc")
    proc = ServerProcess(binary)
    with pytest.raises(ServerStartFailed, match="broken build"):
        proc.start()
    assert not proc.dir.exists()


def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    binary = ServerBinary("gone", tmp_path / "nothing-here", "redis", "0", "libc")
    with pytest.raises(ServerStartFailed, match="get-servers"):
        ServerProcess(binary).start()


def test_aof_restart_keeps_acknowledged_writes() -> None:
    with densekv.embedded(aof=True) as srv:
        client = srv.client()
        for i in range(100):
            client.set(f"k{i}", i)
        srv.restart()
        client = srv.client()
        assert client.dbsize() == 100
        assert client.get("k99") == b"99"


def test_cluster_handle_gives_a_cluster_client() -> None:
    with densekv.embedded(cluster=3) as srv:
        assert srv.is_cluster and srv.cluster is not None
        client = srv.client()
        for i in range(200):
            client.set(f"key:{i}", i)
        sizes = [node.client().dbsize() for node in srv.cluster.nodes]
        assert sum(sizes) == 200 and all(s > 0 for s in sizes)
        info = srv.cluster.nodes[0].client().execute_command("CLUSTER", "INFO").decode()
        assert "cluster_state:ok" in info and "cluster_known_nodes:3" in info
        pids = [n.proc.pid for n in srv.cluster.nodes if n.proc is not None]
    assert not any(pid_alive(p) for p in pids)
