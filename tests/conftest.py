"""Shared fixtures: real servers of the matrix, started once per test session.

* `server_name`  - parametrized over every server of the matrix present on this machine
                   (valkey-9.1 always; the others after scripts/get-servers).
* `server`       - a running ServerProcess of that name (session-scoped, shared).
* `client`       - a client of it, on a server flushed (SYNC) before the test.
* `cluster`      - a 3-master LocalCluster of valkey-9.1 (session-scoped); `cluster_client`
                   flushes every master first.
* `fresh_server` - a factory for a brand-new server process owned by one test (meters).
Set DENSEKV_TEST_SERVERS=valkey-9.1,redis-7.0 to restrict the matrix.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
import redis

from densekv.server.binaries import find_servers
from densekv.server.cluster import LocalCluster
from densekv.server.process import ServerProcess

PRESENT = find_servers()
if os.environ.get("DENSEKV_TEST_SERVERS"):
    wanted = os.environ["DENSEKV_TEST_SERVERS"].split(",")
    PRESENT = {k: v for k, v in PRESENT.items() if k in wanted}
SERVER_NAMES = list(PRESENT)


def pytest_report_header() -> str:
    return "densekv server matrix: " + ", ".join(f"{b.name} ({b.version})" for b in PRESENT.values())


@pytest.fixture(scope="session")
def _servers() -> Iterator[dict[str, ServerProcess]]:
    started: dict[str, ServerProcess] = {}
    yield started
    for proc in started.values():
        proc.stop()


@pytest.fixture(params=SERVER_NAMES)
def server_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(server_name: str, _servers: dict[str, ServerProcess]) -> ServerProcess:
    proc = _servers.get(server_name)
    if proc is None or proc.proc is None or proc.proc.poll() is not None:
        proc = _servers[server_name] = ServerProcess(PRESENT[server_name]).start()
    return proc


@pytest.fixture
def client(server: ServerProcess) -> Iterator[redis.Redis]:
    c = server.client()
    c.execute_command("FLUSHALL", "SYNC")
    yield c
    c.close()


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    if "valkey-9.1" not in PRESENT:
        pytest.skip("the cluster fixture runs valkey-9.1, left out by DENSEKV_TEST_SERVERS")
    with LocalCluster(PRESENT["valkey-9.1"], masters=3) as local:
        yield local


@pytest.fixture
def cluster_client(cluster: LocalCluster) -> Iterator[redis.RedisCluster]:
    for node in cluster.nodes:
        with node.client() as c:
            c.execute_command("FLUSHALL", "SYNC")
    c = cluster.client()
    yield c
    c.close()


@pytest.fixture
def fresh_server() -> Iterator[Callable[..., ServerProcess]]:
    owned: list[ServerProcess] = []

    def start(name: str = "valkey-9.1", **kwargs: object) -> ServerProcess:
        proc = ServerProcess(PRESENT[name], **kwargs).start()  # type: ignore[arg-type]
        owned.append(proc)
        return proc

    yield start
    for proc in owned:
        proc.stop()


def pytest_sessionstart(session: pytest.Session) -> None:
    # CI fetches the whole matrix; a server silently missing there would hide failures.
    if os.environ.get("CI") and not os.environ.get("DENSEKV_TEST_SERVERS"):
        missing = {"redis-7.0", "redis-7.4", "valkey-8.0", "valkey-9.1"} - set(PRESENT)
        if missing:
            raise pytest.UsageError(f"CI needs the whole server matrix; missing: {sorted(missing)}")
