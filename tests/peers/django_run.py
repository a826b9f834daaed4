"""Runs Django's own sessions tests (from the sdist of the installed Django) with Django's
test runner, in the process it is started as, and prints one JSON line with each test's
outcome. tests/peers/test_django_suite.py starts it twice: on Django's db backend (the
control) and on densekv's engine, and compares the two.

    DENSEKV_PEER_ENGINE=db|densekv [DENSEKV_PEER_URL=redis://...] \\
        python tests/peers/django_run.py --tests <sdist>/tests

What runs (LABELS): the sessions_tests classes that use the configured SESSION_ENGINE
(SessionMiddlewareTests builds its sessions from it; ConfiguredEngineSessionTests in
tests/peers/django_configured.py is SessionTestsMixin on it), and the two engine-independent
classes (ClearSessionsCommandTests, SessionBaseTests), which must not notice the engine.
The classes written for one named backend (DatabaseSessionTests, CacheSessionTests,
FileSessionTests, CookieSessionTests, ...) test that backend, whatever is configured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import unittest
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LABELS = [
    "tests.peers.django_configured.ConfiguredEngineSessionTests",
    "sessions_tests.tests.SessionMiddlewareTests",
    "sessions_tests.tests.ClearSessionsCommandTests",
    "sessions_tests.tests.SessionBaseTests",
]


def name_of(test: unittest.TestCase) -> str:
    return f"{type(test).__name__}.{test._testMethodName}"


def run(tests_dir: Path) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT), str(tests_dir)]
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.peers.django_settings"
    import django  # type: ignore[import-untyped]

    django.setup()
    from django.conf import settings  # type: ignore[import-untyped]
    from django.test.runner import DiscoverRunner  # type: ignore[import-untyped]

    passed: list[str] = []

    class Result(unittest.TextTestResult):
        def addSuccess(self, test: unittest.TestCase) -> None:
            super().addSuccess(test)
            passed.append(name_of(test))

    class Runner(DiscoverRunner):  # type: ignore[misc]
        result: unittest.TestResult | None = None

        def get_resultclass(self) -> type[unittest.TextTestResult]:
            return Result

        def run_suite(self, suite: unittest.TestSuite, **kwargs: Any) -> unittest.TestResult:
            self.result = super().run_suite(suite, **kwargs)
            return self.result

    runner = Runner(verbosity=0, interactive=False)
    runner.run_tests(LABELS)
    result = runner.result
    assert result is not None
    return {
        "django": django.__version__,
        "engine": settings.SESSION_ENGINE,
        "passed": sorted(passed),
        "failed": {name_of(t): tb for t, tb in [*result.failures, *result.errors]},  # type: ignore[arg-type]
        "skipped": {name_of(t): why for t, why in result.skipped},  # type: ignore[arg-type]
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tests", type=Path, required=True, help="the sdist's tests/ directory")
    args = parser.parse_args()
    outcome = run(args.tests)
    print(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
