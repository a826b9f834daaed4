"""The test class Django's sessions_tests would have for the configured SESSION_ENGINE:
SessionTestsMixin with `backend` = that engine's SessionStore, on SimpleTestCase (no query
allowed, as Django runs its cache backend) unless the engine is a database backend (then
TestCase, as Django runs its db backend). Imported by tests/peers/django_run.py once Django
is set up with tests/peers/django_settings.py and the sdist's tests/ on sys.path."""

from __future__ import annotations

from importlib import import_module

from django.conf import settings  # type: ignore[import-untyped]
from django.test import SimpleTestCase, TestCase  # type: ignore[import-untyped]
from sessions_tests.tests import SessionTestsMixin  # type: ignore[import-not-found]

_engine = import_module(settings.SESSION_ENGINE)
_base = TestCase if settings.SESSION_ENGINE.endswith((".db", ".cached_db")) else SimpleTestCase


class ConfiguredEngineSessionTests(SessionTestsMixin, _base):  # type: ignore[misc, valid-type]
    backend = _engine.SessionStore
