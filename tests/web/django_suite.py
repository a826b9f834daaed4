"""Django's own session tests (SessionTestsMixin) against densekv's engine.

The mixin lives in tests/sessions_tests/tests.py of Django's *source* distribution (the
wheel has no tests), so `fetch_sessions_tests()` downloads the sdist of the installed
Django version with pip into .servers/.cache/django-sdist/ (git-ignored) and extracts that
one directory; nothing of Django's is committed here. Run as a script, this module
configures Django for the suite alone (settings are global to a process, so the pytest
test in test_django.py runs it in a child process), builds

    class DensekvSessionTests(SessionTestsMixin, SimpleTestCase):
        backend = densekv.integrations.django.SessionStore

as Django does for its cache backend (SimpleTestCase: any database query would fail the
test, and this engine must make none) and prints one JSON line: passed, failed (with
tracebacks), skipped. SKIPS names the mixin tests we skip on purpose, each with its reason.

    python tests/web/django_suite.py --url redis://127.0.0.1:6379/0 [--tests DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import subprocess
import sys
import tarfile
import unittest
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".servers" / ".cache" / "django-sdist"
MEMBER = "tests/sessions_tests"

# Mixin tests this engine deliberately does differently: exact name -> reason. Keep short.
SKIPS: dict[str, str] = {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def fetch_sessions_tests(cache: Path = CACHE, version: str = django.__version__) -> Path:
    """The directory holding sessions_tests/ of Django `version`'s sdist (fetched once)."""
    base = cache / f"django-{version}"
    if (base / MEMBER / "tests.py").is_file():
        return base / "tests"
    with _locked(cache / ".lock"):
        if (base / MEMBER / "tests.py").is_file():
            return base / "tests"
        archive = cache / f"django-{version}.tar.gz"
        if not archive.is_file():
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                 "--disable-pip-version-check", "-q", f"django=={version}", "-d", str(cache)],
                check=False, capture_output=True, text=True, timeout=600)
            if done.returncode != 0 or not archive.is_file():
                raise RuntimeError(f"pip could not download Django {version}'s sdist:\n{done.stderr[-2000:]}")
        prefix = f"django-{version}/{MEMBER}/"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
            for m in members:
                m.name = m.name[len(f"django-{version}/"):]
            tar.extractall(base, members=members, filter="data")
    return base / "tests"


def configure(url: str, namespace: str, tests_dir: Path) -> None:
    sys.path.insert(0, str(tests_dir))
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        SECRET_KEY="densekv-django-suite-" + "x" * 40,
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django.contrib.sessions",
                        "sessions_tests"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        USE_TZ=True,
        SESSION_ENGINE="densekv.integrations.django",
        DENSEKV_SESSIONS={"url": url, "namespace": namespace},
    )
    django.setup()


class _Result(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.passed: list[str] = []

    def addSuccess(self, test: unittest.TestCase) -> None:
        super().addSuccess(test)
        self.passed.append(test._testMethodName)


def run(url: str, tests_dir: Path) -> dict[str, Any]:
    configure(url, f"djsuite{uuid.uuid4().hex[:8]}", tests_dir)
    from django.test import SimpleTestCase
    from django.test.utils import setup_test_environment
    from sessions_tests.tests import SessionTestsMixin  # type: ignore[import-not-found]

    from densekv.integrations.django import SessionStore

    class DensekvSessionTests(SessionTestsMixin, SimpleTestCase):  # type: ignore[misc]
        backend = SessionStore

    for name, reason in SKIPS.items():
        setattr(DensekvSessionTests, name, unittest.skip(reason)(getattr(DensekvSessionTests, name)))
    setup_test_environment()
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(DensekvSessionTests)
    result = _Result()
    suite.run(result)
    return {
        "django": django.__version__,
        "passed": sorted(result.passed),
        "failed": {t._testMethodName: tb for t, tb in result.failures + result.errors},  # type: ignore[attr-defined]
        "skipped": {t._testMethodName: why for t, why in result.skipped},  # type: ignore[attr-defined]
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--tests", type=Path, help="the sdist's tests/ directory (fetched if left out)")
    args = parser.parse_args()
    outcome = run(args.url, args.tests or fetch_sessions_tests())
    print(json.dumps(outcome))
    return 0 if not outcome["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
