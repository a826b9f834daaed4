"""Django's own sessions tests (tests/sessions_tests of the sdist of the installed Django)
against densekv's engine, beside a control run on Django's db backend (its default engine).

tests/peers/django_run.py runs, with Django's test runner in a process of its own (settings
are global to a process: tests/peers/django_settings.py), the sessions_tests classes that use
the configured SESSION_ENGINE: SessionTestsMixin on it (tests/peers/django_configured.py,
on SimpleTestCase for densekv: any database query fails the test) and SessionMiddlewareTests,
plus the engine-independent ClearSessionsCommandTests and SessionBaseTests. Every test that
passes in the control passes with densekv, except EXCLUDED (each with its reason; the same
list is in docs/django.md). An excluded test must still fail with densekv and pass in the
control, so the list cannot outlive its reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from densekv.tools.server.process import ServerProcess
from tests.peers.sdist import source

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("django_run.py")
TIMEOUT_S = 120  # each run takes about a second; a hang must not stall CI

# test -> why it cannot apply to densekv's engine (a server-side store that is not Django's
# database); docs/django.md lists the same tests.
EXCLUDED: dict[str, str] = {
    "SessionMiddlewareTests.test_empty_session_saved":
        "reads the emptied session back from Django's database table "
        "(Session.objects.get(session_key=...)); densekv keeps it on the Redis/Valkey server. "
        "The behaviour it checks (an emptied session keeps its key, is saved empty and its "
        "cookie is sent again) is tests/web/test_django.py::test_an_emptied_session_keeps_its_key_and_cookie.",
}


def run_suite(tests_dir: Path, engine: str, url: str | None = None) -> tuple[dict[str, Any], str]:
    env = {**os.environ, "DENSEKV_PEER_ENGINE": engine, "PYTHONPATH": str(ROOT)}
    if url is not None:
        env["DENSEKV_PEER_URL"] = url
        env["DENSEKV_PEER_NAMESPACE"] = f"djpeer{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", str(RUNNER), "--tests", str(tests_dir)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"the {engine} run broke:\n{done.stderr[-4000:]}"
    return json.loads(lines[-1]), done.stderr


@pytest.fixture(scope="module")
def tests_dir() -> Path:
    found = source("django") / "tests"
    assert (found / "sessions_tests" / "tests.py").is_file(), found
    return found


@pytest.fixture(scope="module")
def control(tests_dir: Path) -> dict[str, Any]:
    outcome, _ = run_suite(tests_dir, "db")
    assert outcome["engine"] == "django.contrib.sessions.backends.db"
    return outcome


def test_djangos_sessions_tests_pass_on_densekv_as_on_djangos_db_backend(
        tests_dir: Path, control: dict[str, Any], server: ServerProcess, client: redis.Redis) -> None:
    outcome, stderr = run_suite(tests_dir, "densekv", server.url)
    assert outcome["engine"] == "densekv.integrations.django"
    assert outcome["django"] == control["django"]
    ran = {*outcome["passed"], *outcome["failed"], *outcome["skipped"]}
    assert ran == {*control["passed"], *control["failed"], *control["skipped"]}  # the same tests
    assert len(control["passed"]) >= 80, control  # Django 5.2: 65 of the mixin's, 26 others
    should_pass = set(control["passed"]) - set(EXCLUDED)
    failed = {t: tb for t, tb in outcome["failed"].items() if t in should_pass}
    assert failed == {}, "\n\n".join(f"{t}:\n{tb}" for t, tb in failed.items())
    assert should_pass <= set(outcome["passed"])
    assert outcome["skipped"] == control["skipped"]
    # the exclusions still need to be: each passes in the control and fails with densekv
    assert set(EXCLUDED) <= set(control["passed"])
    assert set(EXCLUDED) == set(outcome["failed"]), sorted(outcome["failed"])
    assert "Exception ignored" not in stderr, stderr[-4000:]  # e.g. a client left unclosed
    # the engine ran against this server (its store metadata is there)
    assert any(key.startswith(b"djpeer") for key in client.scan_iter(count=1000))
