"""A pytest plugin for the subprocess that runs Litestar's own session-middleware tests
(vendored unchanged under tests/peers/vendored/litestar-<version>/: Litestar's sdist ships
none), started by tests/peers/test_litestar_suite.py with `-p litestar_peer_plugin`, this
directory on PYTHONPATH. Loaded before Litestar's test modules, it provides what they need:

* the fixtures they take from Litestar's top-level tests/conftest.py, which is not copied
  (it pulls in Docker service fixtures, valkey and pytest-lazy-fixtures for tests not run
  here): the same fixtures with the same bodies, below;
* DENSEKV_PEER_BACKEND=densekv: wherever the tests build Litestar's ServerSideSessionConfig
  (the fixtures, and the tests' own `ServerSideSessionConfig(...)` calls, imported after
  this plugin patched the name), they get PeerSessionConfig: densekv's SessionConfig taking
  ServerSideSessionConfig's keywords, on DENSEKV_PEER_URL and namespace
  DENSEKV_PEER_NAMESPACE (one store per event loop, built from the URL); the server-side
  backend fixture is densekv's SessionBackend. "litestar" (the control) leaves Litestar's
  own, on the app's default MemoryStore as Litestar's suite runs it;
* DENSEKV_PEER_REPORT: a file that gets {test id: "passed" | "failed" | "skipped"} as JSON
  (tests/peers/peer_report.py, loaded beside this plugin).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from datetime import datetime
from typing import Any, cast

import pytest
from litestar.middleware.session import server_side
from litestar.middleware.session.base import BaseSessionBackend
from litestar.middleware.session.client_side import ClientSideSessionBackend, CookieBackendConfig
from litestar.middleware.session.server_side import ServerSideSessionBackend
from litestar.openapi.config import OpenAPIConfig
from litestar.stores.memory import MemoryStore
from time_machine import Coordinates, travel

from densekv.integrations.litestar import SessionBackend, SessionConfig

BACKEND = os.environ.get("DENSEKV_PEER_BACKEND", "litestar")


class PeerSessionConfig(SessionConfig):
    """densekv's SessionConfig built as Litestar's ServerSideSessionConfig is: its cookie
    keywords are the same; store (the name of a Litestar Store), session_id_bytes and
    renew_on_access have no meaning here (densekv's store draws 192-bit tokens, and a
    read-only request touches the idle expiry when due) and are taken and ignored."""

    def __init__(self, *, store: str = "sessions", session_id_bytes: int = 32,
                 renew_on_access: bool = False, **fields: Any) -> None:
        super().__init__(url=os.environ["DENSEKV_PEER_URL"],
                         store_options={"namespace": os.environ["DENSEKV_PEER_NAMESPACE"]},
                         **fields)


if BACKEND == "densekv":
    server_side.ServerSideSessionConfig = PeerSessionConfig  # type: ignore[misc,assignment]
elif BACKEND != "litestar":
    raise pytest.UsageError(f"DENSEKV_PEER_BACKEND is litestar or densekv, not {BACKEND!r}")


def _server_side_config() -> Any:
    return server_side.ServerSideSessionConfig()


# The fixtures below are those of Litestar's tests/conftest.py (at the commit named in the
# vendored README.md) that the vendored tests use, with their bodies; only the server-side
# config and backend go through the switch above.


@pytest.fixture()
def memory_store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def cookie_session_backend_config() -> CookieBackendConfig:
    return CookieBackendConfig(secret=os.urandom(16))


@pytest.fixture()
def cookie_session_backend(cookie_session_backend_config: CookieBackendConfig) -> ClientSideSessionBackend:
    return ClientSideSessionBackend(config=cookie_session_backend_config)


@pytest.fixture(params=[pytest.param("cookie_session_backend_config", id="cookie"),
                        pytest.param("server_side_session_config", id="server-side")])
def session_backend_config(request: pytest.FixtureRequest) -> Any:
    # Litestar's takes lazy fixtures (pytest-lazy-fixtures); getfixturevalue is the same
    return request.getfixturevalue(request.param)


@pytest.fixture()
def server_side_session_config() -> Any:
    return _server_side_config()


@pytest.fixture()
def server_side_session_backend(server_side_session_config: Any) -> Any:
    if BACKEND == "densekv":
        return SessionBackend(config=server_side_session_config)
    return ServerSideSessionBackend(config=server_side_session_config)


@pytest.fixture(params=[pytest.param("cookie_session_backend", id="cookie"),
                        pytest.param("server_side_session_backend", id="server-side")])
def session_backend(request: pytest.FixtureRequest) -> BaseSessionBackend[Any]:
    return cast("BaseSessionBackend[Any]", request.getfixturevalue(request.param))


@pytest.fixture()
def session_backend_config_memory(memory_store: MemoryStore) -> Any:
    return _server_side_config()


@pytest.fixture()
def frozen_datetime() -> Generator[Coordinates, None, None]:
    with travel(datetime.utcnow, tick=False) as frozen:
        yield frozen


@pytest.fixture(autouse=True, scope="session")
def disable_warn_implicit_sync_to_thread() -> Generator[None, None, None]:
    old_value = os.getenv("LITESTAR_WARN_IMPLICIT_SYNC_TO_THREAD")
    os.environ["LITESTAR_WARN_IMPLICIT_SYNC_TO_THREAD"] = "0"
    yield
    if old_value is not None:
        os.environ["LITESTAR_WARN_IMPLICIT_SYNC_TO_THREAD"] = old_value


@pytest.fixture(autouse=True)
def _patch_openapi_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("litestar.app.DEFAULT_OPENAPI_CONFIG",
                        OpenAPIConfig(title="Litestar API", version="1.0.0"))
