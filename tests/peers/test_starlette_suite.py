"""Starlette's own tests/middleware/test_session.py (from the sdist of the installed
Starlette, fetched by tests/peers/sdist.py, never copied here), run unchanged in a
subprocess: once on Starlette's SessionMiddleware (the control) and once with densekv's
middleware in its place (tests/peers/starlette_peer_plugin.py), each in both TestClient
modes: as the tests use it (a new event loop per request, so one redis.asyncio client
cannot serve them all) and entered (`with TestClient(app)`: one loop). Every test that
passes in the control passes with densekv, except EXCLUDED (each with its reason; the list
is in docs/starlette.md too).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from functools import cache
from pathlib import Path

import pytest
import redis

import densekv
from densekv.tools.server.process import ServerProcess
from tests.peers.peer_report import outcomes
from tests.peers.sdist import source

HERE = Path(__file__).resolve().parent
SUITE = "tests/middleware/test_session.py"
# Starlette's test_client_factory runs every test on each anyio backend installed; trio is
# left out by a -k expression in both runs, not by this list: redis-py's asyncio client
# (what densekv's async store speaks through) runs on asyncio only.
DESELECT = "not trio"
#: test id (without the backend parameter) -> why it cannot apply to a server-side store
EXCLUDED: dict[str, str] = {}
CLIENT_MODES = ["plain", "with"]


def run_suite(backend: str, client: str, tmp: Path, url: str = "",
              namespace: str = "") -> dict[str, str]:
    """{test id: outcome} of one subprocess run of Starlette's session tests."""
    root = source("starlette")
    report = tmp / f"{backend}-{client}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(HERE.parent.parent))), "DENSEKV_PEER_BACKEND": backend,
           "DENSEKV_PEER_CLIENT": client, "DENSEKV_PEER_URL": url,
           "DENSEKV_PEER_NAMESPACE": namespace, "DENSEKV_PEER_REPORT": str(report)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", SUITE, "-p", "no:cacheprovider", "-o", "addopts=",
         "-p", "no:asyncio", "-p", "no:aiohttp", "-p", "no:xdist", "-p", "starlette_peer_plugin", "-p", "peer_report",
         "-k", DESELECT, "-q", "-rfE"],
        check=False, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    return outcomes(report, proc, f"{backend}/{client}")


@cache
def control(client: str) -> tuple[tuple[str, str], ...]:
    """Starlette's own middleware (no server involved: run once per client mode)."""
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"densekv-starlette-control-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    return tuple(sorted(run_suite("starlette", client, tmp).items()))


def base_id(nodeid: str) -> str:
    """tests/...::test_x[asyncio-a-b] -> test_x[a-b]; tests/...::test_x[asyncio] -> test_x."""
    name = nodeid.rsplit("::", 1)[-1]
    head, _, params = name.partition("[")
    rest = [p for p in params.rstrip("]").split("-") if p and p != "asyncio"] if params else []
    return f"{head}[{'-'.join(rest)}]" if rest else head


@pytest.mark.parametrize("client_mode", CLIENT_MODES)
def test_starlettes_session_tests_pass_on_densekv(client: redis.Redis, server: ServerProcess,
                                                 client_mode: str, tmp_path: Path) -> None:
    expected = dict(control(client_mode))
    passing = {k for k, v in expected.items() if v == "passed"}
    assert len(passing) >= 15, expected  # the control ran the whole file (asyncio)
    namespace = f"peer{uuid.uuid4().hex[:10]}"
    got = run_suite("densekv", client_mode, tmp_path, server.url, namespace)
    assert set(got) == set(expected)  # the same tests were collected
    failed = sorted(k for k in passing if got[k] != "passed" and base_id(k) not in EXCLUDED)
    assert failed == [], got
    unexpected = sorted(k for k in passing if got[k] == "passed" and base_id(k) in EXCLUDED)
    assert unexpected == [], "excluded tests that pass now: take them off EXCLUDED"
    # the sessions really went to densekv: the run left some under its namespace, and
    # Starlette's signed cookies never did
    assert densekv.SessionStore(client, namespace).count() > 0
