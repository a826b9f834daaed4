"""Quart's own session tests, run unchanged against densekv's Quart backend.

Quart's sdist on PyPI ships no tests and CI reaches package indexes only, so Quart's test
files are vendored, unchanged, under tests/peers/vendored/quart-<version>/ (README.md there
says from which commit; SHA256SUMS holds their checksums, checked here first). They run in
a subprocess, with the configuration Quart's pyproject.toml gives pytest (QUART_PYTEST
below: pytest-asyncio in auto mode, warnings as errors) and Quart's own tests/conftest.py,
twice: the control on Quart's SecureCookieSessionInterface, then with
tests/peers/quart_peer_plugin.py loaded, which puts densekv's SessionInterface (and its
session class) in place of Quart's on the `server` fixture, in a fresh namespace. Every
selected test that passes in the control must pass with densekv, except EXCLUDED (each
with its reason; docs/quart.md lists them), and those must still fail, so the list stays
true.

Selected (SELECTED, in both runs): the whole of tests/test_sessions.py (the session
interface's open and save), and the tests of the other vendored files that use the
session through the default interface: test_testing.py's cookie jar, session_transaction
and `async with app.test_client()` tests, and test_templating.py's `session` in a template.
The rest of those two files does not touch the session and is not run.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from functools import cache
from importlib.metadata import version
from pathlib import Path

import redis

import densekv
from densekv.tools.server.process import ServerProcess
from tests.peers.peer_report import outcomes

HERE = Path(__file__).resolve().parent
VENDORED = HERE / "vendored" / "quart-0.22.0"
SELECTED = [
    "tests/test_sessions.py",
    "tests/test_testing.py::test_cookie_jar",
    "tests/test_testing.py::test_session_transactions",
    "tests/test_testing.py::test_with_usage",
    "tests/test_templating.py::test_default_template_context",
]
#: Quart's pyproject.toml [tool.pytest.ini_options] (not vendored: it is not a test file),
#: less its addopts' report flags (--no-cov-on-fail: no pytest-cov here; --showlocals)
QUART_PYTEST = ["-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=session",
                "-o", "filterwarnings=error", "--strict-markers"]
# plugins of this environment that Quart's tests do not use (pytest-asyncio is theirs)
NOT_THEIRS = ["-p", "no:cacheprovider", "-p", "no:aiohttp", "-p", "no:xdist", "-p", "no:randomly"]
#: test id -> why it cannot apply to a server-side store
EXCLUDED: dict[str, str] = {}


def test_vendored_files_are_unchanged() -> None:
    """Every vendored file is as SHA256SUMS says: they are Quart's, copied unchanged."""
    sums = (VENDORED / "SHA256SUMS").read_text().splitlines()
    listed = {}
    for line in sums:
        digest, name = line.split(maxsplit=1)
        listed[name.lstrip("*")] = digest
    present = {p.relative_to(VENDORED).as_posix() for p in VENDORED.rglob("*")
               if p.is_file() and p.name != "SHA256SUMS" and "__pycache__" not in p.parts}
    assert present == set(listed) | {"README.md"}, "a vendored file is not in SHA256SUMS"
    for name, digest in listed.items():
        assert hashlib.sha256((VENDORED / name).read_bytes()).hexdigest() == digest, name


def run_suite(backend: str, tmp: Path, url: str = "", namespace: str = "") -> dict[str, str]:
    """{test id: outcome} of one subprocess run of Quart's selected session tests."""
    report = tmp / f"{backend}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(HERE.parent.parent))),
           "DENSEKV_PEER_BACKEND": backend, "DENSEKV_PEER_URL": url,
           "DENSEKV_PEER_NAMESPACE": namespace, "DENSEKV_PEER_REPORT": str(report),
           "PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ among the vendored files
    # -c os.devnull: not densekv's pyproject.toml (the nearest configuration above the
    # vendored files), Quart's options instead; rootdir and confcutdir: the vendored tree,
    # so test ids are Quart's and only Quart's conftest.py is loaded
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *SELECTED, "-c", os.devnull, "--rootdir", str(VENDORED),
         "--confcutdir", str(VENDORED), *QUART_PYTEST, *NOT_THEIRS, "-p", "quart_peer_plugin", "-p", "peer_report",
         "-q", "-rfE"],
        check=False, cwd=VENDORED, env=env, capture_output=True, text=True, timeout=120)
    return outcomes(report, proc, f"{backend} (Quart {version('quart')})")


@cache
def control() -> tuple[tuple[str, str], ...]:
    """Quart's own cookie session (no server involved: run once per process)."""
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"densekv-quart-control-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    return tuple(sorted(run_suite("quart", tmp).items()))


def test_quarts_session_tests_pass_on_densekv(client: redis.Redis, server: ServerProcess,
                                             tmp_path: Path) -> None:
    expected = dict(control())
    passing = {k for k, v in expected.items() if v == "passed"}
    assert len(passing) >= 8, expected  # the control ran every selected test
    namespace = f"peer{uuid.uuid4().hex[:10]}"
    got = run_suite("densekv", tmp_path, server.url, namespace)
    assert set(got) == set(expected)  # the same tests were collected
    failed = sorted(k for k in passing if got[k] != "passed" and k not in EXCLUDED)
    assert failed == [], got
    unexpected = sorted(k for k in passing if got[k] == "passed" and k in EXCLUDED)
    assert unexpected == [], "excluded tests that pass now: take them off EXCLUDED"
    # the sessions really went to densekv: the run left some under its namespace, and
    # Quart's signed cookies never did
    assert densekv.SessionStore(client, namespace).count() > 0
