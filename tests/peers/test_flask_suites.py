"""Flask's and Flask-Login's own tests, run unchanged against densekv's Flask backend.

Each suite comes from the sdist of the installed version (tests/peers/sdist.py) and runs
twice in a subprocess, from the sdist's own directory with its own pytest configuration
(Flask's and Flask-Login's turn warnings into errors): the control on Flask's default
SecureCookieSessionInterface, then with tests/peers/flask_peer_plugin.py loaded, which gives
every `flask.Flask` the tests make `densekv.integrations.flask.SessionInterface` on a store
of its own on the `server` fixture. Every test that passes in the control must pass with
densekv, except the EXCLUDED ones below (each with its reason; docs/flask.md lists them),
and those must still fail, so the list stays true.

* Flask-Login 0.6.3: the whole suite (114 tests), no exclusion.
* Flask 3.1.3: the whole suite (its session tests in test_basic.py, test_testing.py's
  session_transaction tests, test_reqctx.py, flashing, ...: ~490 tests, 5 s), less the four
  EXCLUDED. A test the control itself fails (test_reqctx.py::test_bad_environ_raises_bad_request
  with Werkzeug 3.1.8) is not compared.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from densekv.tools.server.process import ServerProcess
from tests.peers.sdist import source

HERE = Path(__file__).resolve().parent
#: the densekv runs go on these servers (the issue's pair); the shell, not the server, is tested
SERVERS = ("valkey-9.1", "redis-7.0")
# plugins of this environment that Flask's and Flask-Login's "warnings are errors" pytest
# configuration trips over at start-up; neither suite uses them
NOT_THEIRS = ["-p", "no:asyncio", "-p", "no:aiohttp", "-p", "no:xdist", "-p", "no:randomly"]

#: (suite, test id) -> why the test cannot apply to a server-side store
EXCLUDED: dict[tuple[str, str], str] = {
    ("flask", "tests/test_basic.py::test_missing_session"):
        "expects no session without SECRET_KEY: densekv's cookie is a random token, not "
        "signed data, so it needs no secret key and the session works",
    ("flask", "tests/test_testing.py::test_session_transactions_no_null_sessions"):
        "the same: expects a null session (no SECRET_KEY), densekv opens a real one",
    ("flask", "tests/test_basic.py::test_session_secret_key_fallbacks"):
        "expects the session to vanish when SECRET_KEY changes and come back with "
        "SECRET_KEY_FALLBACKS: densekv's session does not depend on the secret key",
    ("flask", "tests/test_basic.py::test_session_refresh_vary"):
        "expects a permanent session's cookie refreshed (and Vary: Cookie) on a request "
        "that never uses the session: densekv makes no server call for such a request, so "
        "it cannot know the session is permanent; any request that uses it refreshes it",
}


@dataclass
class Outcome:
    passed: set[str]
    failed: set[str]  # failures and errors
    skipped: set[str]
    summary: str  # the plugin's "densekv-peer: apps=N created=C loaded=L" line ('' in the control)
    tail: str


def _test_id(case: ET.Element) -> str:
    """pytest's id of a junit testcase: `tests/test_x.py[::Class]::test`."""
    file = case.get("file", "")
    module = file.removesuffix(".py").replace("/", ".")
    cls = case.get("classname", "").removeprefix(module).lstrip(".")
    return "::".join(p for p in (file, cls, case.get("name", "")) if p)


def run_suite(cwd: Path, args: list[str], *, url: str | None, tmp: Path) -> Outcome:
    """Run a peer suite in a subprocess; `url` None is the control (Flask's own backend)."""
    junit = tmp / ("densekv.xml" if url else "control.xml")
    pythonpath = [str(HERE), str(HERE.parent.parent)]  # the plugin, and this checkout's densekv
    if importlib.util.find_spec("semantic_version") is None:  # Flask-Login's test import
        shim = tmp / "shim"
        shim.mkdir(exist_ok=True)
        (shim / "semantic_version.py").write_text(
            "class Version:\n    def __init__(self, *args, **kwargs):\n        pass\n")
        pythonpath.append(str(shim))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "DENSEKV_PEER_")) and k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    plugins = ["-p", "flask_pytest_compat"]
    if url is not None:
        env["DENSEKV_PEER_URL"] = url
        plugins += ["-p", "flask_peer_plugin"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         *NOT_THEIRS, *plugins, f"--junitxml={junit}", "-o", "junit_family=xunit1"],
        check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=180,
    )
    out = proc.stdout + proc.stderr
    assert junit.exists(), out[-3000:]
    outcome = Outcome(set(), set(), set(), "", out[-3000:])
    for case in ET.parse(junit).getroot().iter("testcase"):
        test_id = _test_id(case)
        if case.find("failure") is not None or case.find("error") is not None:
            outcome.failed.add(test_id)
        elif case.find("skipped") is not None:
            outcome.skipped.add(test_id)
        else:
            outcome.passed.add(test_id)
    for line in out.splitlines():
        if line.startswith("densekv-peer:"):
            outcome.summary = line
    return outcome


def compare(suite: str, control: Outcome, densekv: Outcome) -> None:
    excluded = {test for (s, test) in EXCLUDED if s == suite}
    assert control.passed, control.tail
    missing = control.passed - densekv.passed - excluded
    assert not missing, f"pass in the control, not with densekv: {sorted(missing)}\n{densekv.tail}"
    now_passing = excluded & densekv.passed
    assert not now_passing, f"excluded but passing: drop them from EXCLUDED: {sorted(now_passing)}"
    unknown = excluded - control.passed
    assert not unknown, f"excluded tests the control does not pass (renamed?): {sorted(unknown)}"
    # densekv really served the sessions: sessions created in the store and read back
    counts = dict(part.split("=") for part in densekv.summary.split()[1:])
    assert int(counts["apps"]) > 0 and int(counts["created"]) > 0, densekv.summary
    assert int(counts["loaded"]) > 0, densekv.summary


def _on_servers_of_the_pair(server: ServerProcess) -> None:
    if server.binary.name not in SERVERS:
        pytest.skip(f"the peer suites run on {' and '.join(SERVERS)} (CI time); the store "
                    "itself is tested on every server")


FLASK_LOGIN_ARGS = ["tests"]
FLASK_ARGS = ["tests"]


@pytest.fixture(scope="module")
def flask_login_source() -> Path:
    return source("Flask-Login")


@pytest.fixture(scope="module")
def flask_source() -> Path:
    return source("Flask")


@pytest.fixture(scope="module")
def flask_login_control(flask_login_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The control needs no server: run once, compared with every server's densekv run."""
    return run_suite(flask_login_source, FLASK_LOGIN_ARGS, url=None,
                     tmp=tmp_path_factory.mktemp("flask-login-control"))


@pytest.fixture(scope="module")
def flask_control(flask_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return run_suite(flask_source, FLASK_ARGS, url=None, tmp=tmp_path_factory.mktemp("flask-control"))


def test_flask_login_suite_passes_whole_with_densekv(server: ServerProcess, flask_login_source: Path,
                                                    flask_login_control: Outcome,
                                                    tmp_path: Path) -> None:
    _on_servers_of_the_pair(server)
    densekv = run_suite(flask_login_source, FLASK_LOGIN_ARGS, url=server.url, tmp=tmp_path)
    compare("flask-login", flask_login_control, densekv)
    assert len(densekv.passed) == len(flask_login_control.passed) >= 114, densekv.tail


def test_flask_session_tests_pass_with_densekv(server: ServerProcess, flask_source: Path,
                                              flask_control: Outcome, tmp_path: Path) -> None:
    _on_servers_of_the_pair(server)
    densekv = run_suite(flask_source, FLASK_ARGS, url=server.url, tmp=tmp_path)
    compare("flask", flask_control, densekv)
    excluded = {t for (s, t) in EXCLUDED if s == "flask"}
    transactions = {t for t in flask_control.passed if "session_transaction" in t}
    assert len(transactions) >= 3 and transactions - excluded <= densekv.passed
    assert len(densekv.passed) == len(flask_control.passed) - len(excluded) >= 480, densekv.tail


def test_every_exclusion_is_listed_in_the_docs_page() -> None:
    page = (HERE.parents[1] / "docs" / "flask.md").read_text()
    for _, test in EXCLUDED:
        assert f"`{test.removeprefix('tests/')}`" in page, test
