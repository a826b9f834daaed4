"""Fixtures of the web contract: one test app per framework on the matrix server.

* `framework`   - the module tests/web/apps/<fw>_app.py, parametrized over FRAMEWORKS;
                  a framework whose module is not written yet is skipped, not failed.
* `web_factory` - a WebFactory: drivers (browsers) of that framework's app on the `server`
                  fixture, all under one namespace fresh for the test; `.store()` opens a
                  densekv store on the same namespace to look at what the app wrote (with
                  the app's lifecycle options: a store with others would not open).
* `web`         - `web_factory()`: a driver with the default store settings.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis

import densekv
from densekv.tools.server.process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the apps are imported as tests.web.apps.<fw>_app
    sys.path.insert(0, str(ROOT))

from tests.web.driver import Driver

FRAMEWORKS = ["flask", "django", "starlette", "aiohttp", "quart", "litestar"]
_NAMESPACES = itertools.count()
#: the store options every process of a namespace shares (densekv/sessions/meta.py Lifecycle)
LIFECYCLE = ("track_devices", "max_sessions_per_identity", "on_limit", "events_stream")


@pytest.fixture(params=FRAMEWORKS)
def framework(request: pytest.FixtureRequest) -> ModuleType:
    name = f"tests.web.apps.{request.param}_app"
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not written yet")
    return importlib.import_module(name)


class WebFactory:
    """Drivers and inspection stores for one test; everything opened is closed after it."""

    def __init__(self, app: ModuleType, server: ServerProcess) -> None:
        self.app = app
        self.server = server
        self.namespace = f"web{next(_NAMESPACES)}x{uuid.uuid4().hex[:8]}"
        self._drivers: list[Driver] = []
        self._clients: list[redis.Redis] = []
        self._life: dict[str, Any] = {}  # the lifecycle options the app's stores were given

    def __call__(self, *, url: str | None = None, ttl: int = 3600, idle_ttl: int | None = None,
                 clock: Callable[[], float] = time.time, **store_kwargs: Any) -> Driver:
        self._life = {k: v for k, v in store_kwargs.items() if k in LIFECYCLE}
        driver: Driver = self.app.make_driver(url or self.server.url, self.namespace, ttl=ttl,
                                              idle_ttl=idle_ttl, clock=clock, **store_kwargs)
        self._drivers.append(driver)
        return driver

    def client(self) -> redis.Redis:
        c = self.server.client()
        self._clients.append(c)
        return c

    def store(self, **kwargs: Any) -> densekv.SessionStore:
        """A store on the app's namespace (layout and partitions adopted from it), with the
        lifecycle options the app was given unless `kwargs` name others."""
        return densekv.SessionStore(self.client(), namespace=self.namespace, **{**self._life, **kwargs})

    def keys(self) -> list[bytes]:
        """Every key of this test's namespace."""
        return sorted(self.client().scan_iter(match=f"{self.namespace}:*", count=1000))

    def close(self) -> None:
        for driver in self._drivers:
            driver.close()
        for c in self._clients:
            c.close()


@pytest.fixture
def web_factory(framework: ModuleType, server: ServerProcess) -> Iterator[WebFactory]:
    factory = WebFactory(framework, server)
    yield factory
    factory.close()


@pytest.fixture
def web(web_factory: WebFactory) -> Driver:
    return web_factory()
