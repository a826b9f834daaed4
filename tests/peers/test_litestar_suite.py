"""Litestar's own session-middleware tests, run unchanged in a subprocess: once on Litestar's
ServerSideSessionConfig (the control: the app's default MemoryStore, as Litestar's suite
runs them) and once with densekv's SessionConfig wherever they build a server-side config
(tests/peers/litestar_peer_plugin.py). Every test that passes in the control passes with
densekv, except EXCLUDED (each with its reason; the list is in docs/litestar.md too).

Litestar's sdist ships no tests and CI reaches package registries only, so the files are
vendored (tests/peers/vendored/litestar-<version>/, README.md there names the commit) and
checked against their SHA256SUMS here. Not vendored: test_client_side_backend.py (the
encrypted cookie of CookieBackendConfig: no server-side config in it, nothing densekv can
stand in for); the tests' cookie parametrization is deselected in both runs for the same
reason.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from functools import cache
from pathlib import Path

import redis

import densekv
from densekv.tools.server.process import ServerProcess
from tests.peers.peer_report import outcomes
from tests.peers.sdist import ROOT, installed

HERE = Path(__file__).resolve().parent
VENDORED = HERE / "vendored" / "litestar-2.25.0"
SUITE = ["tests/unit/test_middleware/test_session", "tests/unit/test_security/test_session_auth.py"]
# the client-side (encrypted cookie) parametrization never builds a server-side config
DESELECT = "not cookie"
# Litestar's pytest settings (its pyproject.toml at the vendored commit), reduced to what these
# files need, plus one ignore: 2.25.0 (after that commit) warns of a handler's `data: User`
# without a body marker, which two of the vendored tests declare
_INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
xfail_strict = true
filterwarnings =
    error
    ignore: datetime.datetime.utcnow:DeprecationWarning:time_machine
    ignore:Use of deprecated default '__check_model__':DeprecationWarning:polyfactory:
    ignore:.*Reserved kwarg 'data' declared without a body marker:DeprecationWarning
"""
_STORE_API = ("calls ServerSideSessionBackend.{}(session_id, data, store) on a Litestar "
              "Store: densekv's backend has no such API (its sessions are an "
              "AsyncSessionStore's, read and written by the middleware)")
#: test id (file::name[params]) -> why it cannot pass with densekv's backend
EXCLUDED: dict[str, str] = {
    "test_server_side_backend.py::test_non_default_store":
        "asserts the session is in the Litestar MemoryStore given as the app's stores="
        "{'sessions': ...}; densekv's sessions live in its own store on the server",
    "test_server_side_backend.py::test_set_store_name":
        "asserts the session is in the Litestar Store named by ServerSideSessionConfig("
        "store=...); densekv's sessions live in its own store on the server",
    "test_server_side_backend.py::test_get_set": _STORE_API.format("set/get"),
    "test_server_side_backend.py::test_get_renew_on_access": _STORE_API.format("set/get")
    + "; renew_on_access is densekv's idle expiry (idle_ttl), touched when due",
    "test_server_side_backend.py::test_get_set_multiple_returns_correct_identity":
        _STORE_API.format("set/get"),
    "test_server_side_backend.py::test_delete": _STORE_API.format("set/get/delete"),
    "test_server_side_backend.py::test_delete_idempotence": _STORE_API.format("set/delete"),
    "test_server_side_backend.py::test_max_age_expires": _STORE_API.format("set/get")
    + "; it also moves a faked clock, which the server's expiry does not follow",
}


def test_the_vendored_files_are_litestars_unchanged() -> None:
    sums = {}
    for line in (VENDORED / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name] = digest
    assert "LICENSE" in sums and len(sums) >= 10
    got = {name: hashlib.sha256((VENDORED / name).read_bytes()).hexdigest() for name in sums}
    assert got == sums, "a vendored file changed: re-copy it from Litestar, never edit it"
    present = {str(p.relative_to(VENDORED)) for p in (VENDORED / "tests").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert present == {n for n in sums if n.startswith("tests/")}, "a file not in SHA256SUMS"


def run_suite(backend: str, tmp: Path, url: str = "", namespace: str = "") -> dict[str, str]:
    """{test id: outcome} of one subprocess run of Litestar's session tests."""
    installed("litestar")
    ini = tmp / "pytest.ini"
    ini.write_text(_INI)
    report = tmp / f"{backend}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT))),
           "PYTHONDONTWRITEBYTECODE": "1",  # the vendored tree stays as copied
           "DENSEKV_PEER_BACKEND": backend, "DENSEKV_PEER_URL": url,
           "DENSEKV_PEER_NAMESPACE": namespace, "DENSEKV_PEER_REPORT": str(report)}
    # -c/--rootdir/--confcutdir: Litestar's settings, not densekv's pyproject, and no
    # conftest above Litestar's tests/
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *SUITE, "-c", str(ini), "--rootdir", str(VENDORED),
         "--confcutdir", str(VENDORED / "tests"), "-p", "no:cacheprovider", "-p", "no:xdist",
         "-p", "no:aiohttp", "-p", "litestar_peer_plugin", "-p", "peer_report", "-k", DESELECT, "-q", "-rfE"],
        check=False, cwd=VENDORED, env=env, capture_output=True, text=True, timeout=180)
    return outcomes(report, proc, backend, tail=8000)


@cache
def control() -> tuple[tuple[str, str], ...]:
    """Litestar's own backend (its MemoryStore, no server involved: run once)."""
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"densekv-litestar-control-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    return tuple(sorted(run_suite("litestar", tmp).items()))


def short_id(nodeid: str) -> str:
    """tests/unit/.../test_x.py::test_y[a] -> test_x.py::test_y (EXCLUDED's keys)."""
    path, _, name = nodeid.partition("::")
    return f"{path.rsplit('/', 1)[-1]}::{name.partition('[')[0]}"


def test_litestars_session_tests_pass_on_densekv(client: redis.Redis, server: ServerProcess,
                                                tmp_path: Path) -> None:
    expected = dict(control())
    passing = {k for k, v in expected.items() if v == "passed"}
    assert len(passing) >= 25, expected  # the control ran the whole selection
    namespace = f"peer{uuid.uuid4().hex[:10]}"
    got = run_suite("densekv", tmp_path, server.url, namespace)
    assert set(got) == set(expected)  # the same tests were collected
    assert {short_id(k) for k in expected} >= set(EXCLUDED), "EXCLUDED names a test not run"
    failed = sorted(k for k in passing if got[k] != "passed" and short_id(k) not in EXCLUDED)
    assert failed == [], got
    unexpected = sorted(k for k in passing if got[k] == "passed" and short_id(k) in EXCLUDED)
    assert unexpected == [], "excluded tests that pass now: take them off EXCLUDED"
    # the sessions really went to densekv: the run left some under its namespace
    assert densekv.SessionStore(client, namespace).count() > 0
