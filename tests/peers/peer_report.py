"""The two halves of a peer suite's report, shared by the Starlette, Quart and Litestar runs.

In the subprocess (a plugin loads it with `-p peer_report`, this directory on PYTHONPATH):
pytest_runtest_logreport records each test's outcome ("failed" wins over anything, "skipped"
and "passed" only if nothing else was recorded) and pytest_sessionfinish writes
{"backend": DENSEKV_PEER_BACKEND, "outcomes": {test id: outcome}} to DENSEKV_PEER_REPORT.
In the runner (tests/peers/test_<framework>_suite.py): `outcomes` reads that file back.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

_OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _OUTCOMES[report.nodeid] = "failed"
    elif report.skipped:
        _OUTCOMES.setdefault(report.nodeid, "skipped")
    elif report.when == "call":
        _OUTCOMES.setdefault(report.nodeid, "passed")


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("DENSEKV_PEER_REPORT")
    if target:
        with open(target, "w") as fh:
            json.dump({"backend": os.environ.get("DENSEKV_PEER_BACKEND"), "outcomes": _OUTCOMES}, fh)


def outcomes(report: Path, proc: subprocess.CompletedProcess[str], label: str,
             tail: int = 6000) -> dict[str, str]:
    """{test id: outcome} of the run `proc` that wrote `report` (its output in the assertion
    when it wrote none, or an empty one), printed as "label: N of M passed; failed: [...]"
    with the run's last `tail` characters when any failed."""
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    got: dict[str, str] = json.loads(report.read_text())["outcomes"]
    assert got, proc.stdout[-3000:]
    failed = sorted(k for k, v in got.items() if v == "failed")
    print(f"{label}: {len(got) - len(failed)} of {len(got)} passed; failed: {failed}")
    if failed:
        print(proc.stdout[-tail:])
    return got
