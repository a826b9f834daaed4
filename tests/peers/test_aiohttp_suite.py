"""aiohttp-session's own storage tests (from its sdist, tests/peers/sdist.py) against densekv's
Storage, beside a control run on aiohttp-session's own storages (RedisStorage on a real
server, SimpleCookieStorage where the tests use it).

Both runs are subprocesses of pytest with tests/peers/aiohttp_peer.py as their conftest
(theirs starts docker); the densekv run leaves out EXCLUDED, the tests that read what only
aiohttp-session's storages have (the Redis key layout, a key_factory, the JSON cookie,
RedisStorage's constructor checks), each with its reason. Every other test that passes in the
control must pass with densekv. FILES is what is run; the rest of their suite is listed in
NOT_RUN with the reason. docs/aiohttp.md repeats both lists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess
from tests.peers.sdist import ROOT, source

FILES = ["test_redis_storage.py", "test_http_exception.py", "test_response_types.py",
         "test_abstract_storage.py"]

NOT_RUN = {
    "test_cookie_storage.py": "reads the session JSON in the cookie (SimpleCookieStorage)",
    "test_encrypted_cookie_storage.py": "decrypts the cookie (EncryptedCookieStorage)",
    "test_nacl_storage.py": "decrypts the cookie (NaClCookieStorage)",
    "test_memcached_storage.py": "reads memcached's key layout (MemcachedStorage)",
    "test_path_domain.py": "reads the session JSON in the cookie; the path and domain "
                           "attributes are checked in tests/web/test_aiohttp.py",
    "test_get_session.py": "aiohttp_session's get_session/new_session, no storage involved",
    "test_session_dict.py": "aiohttp_session's Session class, no storage involved",
    "test_session_middleware.py": "aiohttp_session's middleware factory, no storage involved",
}

EXCLUDED = {
    "test_redis_storage.py::test_load_bad_session":
        "stores a value RedisStorage cannot decode and expects a session that is not new; "
        "densekv reads an undecodable session as no session (new, a new token on write)",
    "test_redis_storage.py::test_create_cookie_in_handler":
        "reads the Redis key AIOHTTP_SESSION_<cookie> (RedisStorage's key layout); the same "
        "round trip through densekv's store is test_change_session",
    "test_redis_storage.py::test_set_ttl_on_session_saving":
        "reads the TTL of RedisStorage's key; densekv's stored lifetime from max_age is "
        "checked in tests/web/test_aiohttp.py",
    "test_redis_storage.py::test_set_ttl_manually_set":
        "reads the TTL of RedisStorage's key; session.max_age as the stored lifetime is "
        "checked in tests/web/test_aiohttp.py",
    "test_redis_storage.py::test_create_storage_with_custom_key_factory":
        "densekv draws its tokens (192 random bits); there is no key_factory",
    "test_redis_storage.py::test_no_aioredis_installed":
        "RedisStorage's constructor check of its redis import",
    "test_redis_storage.py::test_old_aioredis_version":
        "RedisStorage's constructor check of the redis-py version",
    "test_abstract_storage.py::test_max_age_session_reset":
        "reads the session JSON in the cookie and fakes time.time, which the server's "
        "expiry does not follow",
}

_INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""

_PYTEST_MOCK = '''"""What the peer tests import from pytest-mock (the mocker fixture is aiohttp_peer's)."""
from typing import Any as MockFixture  # noqa: F401
'''


@pytest.fixture(scope="module")
def peer_server() -> Iterator[ServerProcess]:
    present = find_servers()
    wanted = os.environ.get("DENSEKV_TEST_SERVERS", "").split(",")
    names = [n for n in present if n in wanted] if wanted != [""] else list(present)
    if not names:
        pytest.skip("no server of the matrix is present")
    proc = ServerProcess(present["valkey-9.1" if "valkey-9.1" in names else names[0]]).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def peer_tests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Their test files (FILES, plus typedefs.py) as the package peer_tests, without their
    conftest, in a fresh directory."""
    tests = source("aiohttp-session") / "tests"
    base = tmp_path_factory.mktemp("aiohttp_session_suite")
    package = base / "peer_tests"
    package.mkdir()
    for name in ["__init__.py", "typedefs.py", *FILES]:
        shutil.copy(tests / name, package / name)
    (base / "pytest.ini").write_text(_INI)
    (base / "pytest_mock.py").write_text(_PYTEST_MOCK)
    return base


def run(base: Path, backend: str, url: str) -> tuple[dict[str, str], str]:
    """Run the suite on `backend`; each test's outcome by 'file::name', and the output."""
    report = base / f"{backend}.xml"
    deselect = [f"--deselect=peer_tests/{test}" for test in EXCLUDED] if backend == "densekv" else []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AIOHTTP_PEER_URL": url,
           "AIOHTTP_PEER_BACKEND": backend}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "peer_tests", "-c", str(base / "pytest.ini"),
         "--rootdir", str(base), "-p", "no:cacheprovider", "-o", "addopts=", "-p",
         "tests.peers.aiohttp_peer", "-p", "no:xdist", "-q", f"--junitxml={report}", *deselect],
        check=False, cwd=base, env=env, capture_output=True, text=True, timeout=120,
    )
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).iter("testcase"):
        test = f"{case.get('classname', '').rsplit('.', 1)[-1]}.py::{case.get('name')}"
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[test] = kinds[0] if kinds else "passed"
    return outcomes, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def runs(peer_tests: Path, peer_server: ServerProcess) -> dict[str, tuple[dict[str, str], str]]:
    """Both runs' outcomes, and under "keys" the key prefixes the densekv run left (the
    server is flushed before it)."""
    out = {}
    client = peer_server.client()
    try:
        for backend in ("control", "densekv"):
            client.flushall()
            started = time.monotonic()
            out[backend] = run(peer_tests, backend, peer_server.url)
            assert time.monotonic() - started < 60, f"the {backend} run took over 60 s"
        prefixes = {key.split(b":")[0].split(b"_")[0].decode() for key in client.scan_iter(count=1000)}
        out["keys"] = ({prefix: "" for prefix in prefixes}, "")
    finally:
        client.close()
    return out


def passed(outcomes: dict[str, str]) -> set[str]:
    return {test for test, outcome in outcomes.items() if outcome == "passed"}


def test_the_control_run_passes_on_aiohttp_sessions_own_storages(runs: dict[str, tuple[dict[str, str], str]]) -> None:
    outcomes, output = runs["control"]
    assert len(outcomes) >= 20, output
    assert passed(outcomes) == set(outcomes), output


def test_densekv_passes_every_test_the_control_passes_but_the_exclusions(
        runs: dict[str, tuple[dict[str, str], str]]) -> None:
    control, _ = runs["control"]
    outcomes, output = runs["densekv"]
    assert set(outcomes) == set(control) - set(EXCLUDED), output  # nothing else left out
    assert passed(control) - set(EXCLUDED) <= passed(outcomes), output
    assert passed(outcomes) == set(outcomes), output


def test_the_densekv_run_stored_its_sessions_in_densekv(
        runs: dict[str, tuple[dict[str, str], str]]) -> None:
    """The rebinding took: densekv namespaces, and no RedisStorage key (AIOHTTP_SESSION_...)."""
    prefixes = set(runs["keys"][0])
    assert "AIOHTTP" not in prefixes
    assert len({p for p in prefixes if p.startswith("peer")}) >= 5  # 7 of their tests write


def test_every_exclusion_names_a_test_of_theirs(runs: dict[str, tuple[dict[str, str], str]]) -> None:
    control, _ = runs["control"]
    assert set(EXCLUDED) <= set(control)
    assert not set(NOT_RUN) & set(FILES)
    run_or_listed = {*FILES, *NOT_RUN, "conftest.py", "typedefs.py", "__init__.py"}
    assert {p.name for p in (source("aiohttp-session") / "tests").glob("*.py")} == run_or_listed
