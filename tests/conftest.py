"""Shared fixtures: real servers of the matrix, started once per test session.

* `server_name`  - parametrized over every server of the matrix present on this machine
                   (valkey-9.1 always; the others after scripts/get-servers).
* `server`       - a running ServerProcess of that name (session-scoped, shared).
* `client`       - a client of it, on a server flushed (SYNC) before the test.
* `cluster`      - a 3-master LocalCluster of valkey-9.1 (session-scoped); `cluster_client`
                   flushes every master first. The contract tests named in REPLICATED_TOO run
                   a second time on `replicated_cluster` (their `cluster` and `cluster_client`
                   are then that one).
* `replicated_cluster` - 3 masters + 3 replicas (session-scoped) of REPLICATED_SERVER
                   (valkey-9.1, or the first server DENSEKV_TEST_SERVERS leaves;
                   DENSEKV_TEST_REPLICATED=redis-7.0 picks another); `replicated_client` is a
                   cluster client on it, every master flushed and the cluster healthy (a test
                   that killed or moved something left it healed: heal() runs first).
* `fresh_server` - a factory for a brand-new server process owned by one test (meters).
Set DENSEKV_TEST_SERVERS=valkey-9.1,redis-7.0 to restrict the matrix.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
import redis

from densekv.tools.server.binaries import find_servers
from densekv.tools.server.cluster import LocalCluster
from densekv.tools.server.process import ServerProcess

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
def _plain_cluster() -> Iterator[LocalCluster]:
    if "valkey-9.1" not in PRESENT:
        pytest.skip("the cluster fixture runs valkey-9.1, left out by DENSEKV_TEST_SERVERS")
    with LocalCluster(PRESENT["valkey-9.1"], masters=3) as local:
        yield local


REPLICATED_SERVER = os.environ.get("DENSEKV_TEST_REPLICATED") or (
    "valkey-9.1" if "valkey-9.1" in PRESENT else next(iter(PRESENT), "valkey-9.1"))
#: contract tests (module, test) that run on the 3+3 replicated cluster too
REPLICATED_TOO = {
    ("test_sessions", "test_every_layout_matches_the_model_on_a_cluster"),
    ("test_sets", "test_every_layout_matches_the_model_on_a_cluster"),
    ("test_maps", "test_map_matches_the_model_on_a_cluster"),
    ("test_bloom", "test_contract_on_a_cluster"),
    ("test_cluster_async", "test_the_async_session_store_matches_the_model_on_a_cluster"),
    ("test_cluster_async", "test_the_async_set_matches_the_model_on_a_cluster"),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if (metafunc.module.__name__.rsplit(".", 1)[-1], metafunc.function.__name__) in REPLICATED_TOO:
        metafunc.parametrize("cluster_kind", ["masters", f"replicated-{REPLICATED_SERVER}"], indirect=True)


@pytest.fixture
def cluster_kind(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "masters"))


def _has_field_ttl(server: str) -> bool:
    """Hash field TTL (HEXPIRE): Redis 7.4+, Valkey 9+ (the plain cluster is valkey-9.1)."""
    kind, _, version = server.partition("-")
    major_minor = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    return major_minor >= ((9, 0) if kind == "valkey" else (7, 4))


@pytest.fixture
def cluster(cluster_kind: str, request: pytest.FixtureRequest) -> LocalCluster:
    callspec = getattr(request.node, "callspec", None)
    if (cluster_kind != "masters" and callspec is not None and callspec.params.get("ttl_mode") == "field"
            and not _has_field_ttl(REPLICATED_SERVER)):
        pytest.skip(f"{REPLICATED_SERVER} has no hash field TTL")
    name = "_plain_cluster" if cluster_kind == "masters" else "replicated_cluster"
    local: LocalCluster = request.getfixturevalue(name)
    return local


@pytest.fixture
def cluster_client(cluster: LocalCluster) -> Iterator[redis.RedisCluster]:
    if cluster.replicas:
        cluster.heal()
    cluster.flush()
    c = cluster.client()
    yield c
    c.close()


@pytest.fixture(scope="session")
def replicated_cluster() -> Iterator[LocalCluster]:
    if REPLICATED_SERVER not in PRESENT:
        pytest.skip(f"the replicated cluster runs {REPLICATED_SERVER}, not present here")
    with LocalCluster(PRESENT[REPLICATED_SERVER], masters=3, replicas=1) as local:
        yield local


@pytest.fixture
def replicated_client(replicated_cluster: LocalCluster) -> Iterator[redis.RedisCluster]:
    replicated_cluster.heal()
    replicated_cluster.flush()
    c = replicated_cluster.client()
    yield c
    c.close()


@pytest.fixture
def fresh_server() -> Iterator[Callable[..., ServerProcess]]:
    owned: list[ServerProcess] = []

    def start(name: str = "valkey-9.1", **kwargs: object) -> ServerProcess:
        if name not in PRESENT:
            pytest.skip(f"{name} is not in this run's servers (DENSEKV_TEST_SERVERS)")
        proc = ServerProcess(PRESENT[name], **kwargs).start()  # type: ignore[arg-type]
        owned.append(proc)
        return proc

    yield start
    for proc in owned:
        proc.stop()


def pytest_sessionstart(session: pytest.Session) -> None:
    # CI fetches the whole matrix; a server silently missing there would hide failures.
    if os.environ.get("CI") and not os.environ.get("DENSEKV_TEST_SERVERS"):
        missing = {"redis-7.0", "redis-7.4", "redis-8.0", "valkey-8.0", "valkey-9.1"} - set(PRESENT)
        if missing:
            raise pytest.UsageError(f"CI needs the whole server matrix; missing: {sorted(missing)}")


# -- hypothesis profiles ------------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    """No deadline anywhere: an example takes as long as a loaded machine makes it (the
    default 200 ms deadline failed a property once under load, issue 14). With CI set, the
    "ci" profile also derandomizes: the same examples on every run, so a CI failure
    reproduces locally with CI=1. A failing example prints its reproduce blob.
    HYPOTHESIS_PROFILE=dev|ci (or --hypothesis-profile) picks a profile explicitly."""
    from hypothesis import settings

    settings.register_profile("dev", deadline=None, print_blob=True)
    settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True, database=None)
    if not config.getoption("--hypothesis-profile", None):
        settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
