"""The settings of the Django peer-suite runs (tests/peers/django_run.py): the least Django's
sessions_tests need, with the session engine picked by DENSEKV_PEER_ENGINE ("db": Django's
own database backend, the control; "densekv": densekv's engine on DENSEKV_PEER_URL under the
namespace DENSEKV_PEER_NAMESPACE)."""

from __future__ import annotations

import os

ENGINES = {"db": "django.contrib.sessions.backends.db", "cache": "django.contrib.sessions.backends.cache",
           "densekv": "densekv.integrations.django"}
PEER_ENGINE = os.environ.get("DENSEKV_PEER_ENGINE", "densekv")

DEBUG = False
SECRET_KEY = "densekv-peer-suite-" + "x" * 40
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django.contrib.sessions",
                  "sessions_tests"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
SESSION_ENGINE = ENGINES[PEER_ENGINE]
if PEER_ENGINE == "densekv":
    DENSEKV_SESSIONS = {"url": os.environ["DENSEKV_PEER_URL"],
                        "namespace": os.environ.get("DENSEKV_PEER_NAMESPACE", "django_peer")}
