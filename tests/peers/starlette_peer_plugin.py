"""A pytest plugin for the subprocess that runs Starlette's own
tests/middleware/test_session.py (tests/peers/test_starlette_suite.py starts it with
`-p starlette_peer_plugin`, this directory on PYTHONPATH). Loaded before Starlette's
conftest and test module, it sets up what the environment asks for:

* DENSEKV_PEER_BACKEND=densekv: `starlette.middleware.sessions.SessionMiddleware` becomes
  PeerSessionMiddleware, densekv's middleware with Starlette's signature (secret_key taken
  and ignored: the cookie holds a random token), on DENSEKV_PEER_URL and namespace
  DENSEKV_PEER_NAMESPACE, built from the URL (one store per event loop). "starlette" (the
  control) leaves Starlette's own.
* DENSEKV_PEER_CLIENT=with: every TestClient is entered on construction (as `with
  TestClient(app) as client:` does: one event loop for all its requests) and exited after
  the test; "plain" leaves TestClient as the tests use it (a new loop per request).
* DENSEKV_PEER_REPORT: a file that gets {test id: "passed" | "failed" | "skipped"} as JSON
  (tests/peers/peer_report.py, loaded beside this plugin).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Literal

import pytest
import starlette.middleware.sessions
import starlette.testclient
from starlette.types import ASGIApp

from densekv.integrations.starlette import SessionMiddleware

BACKEND = os.environ.get("DENSEKV_PEER_BACKEND", "starlette")
CLIENT = os.environ.get("DENSEKV_PEER_CLIENT", "plain")


class PeerSessionMiddleware(SessionMiddleware):
    """densekv's middleware called as Starlette's SessionMiddleware is."""

    def __init__(
        self,
        app: ASGIApp,
        secret_key: Any,
        session_cookie: str = "session",
        max_age: int | None = 14 * 24 * 60 * 60,
        path: str = "/",
        same_site: Literal["lax", "strict", "none"] = "lax",
        https_only: bool = False,
        domain: str | None = None,
        partitioned: bool = False,
    ) -> None:
        super().__init__(
            app, url=os.environ["DENSEKV_PEER_URL"],
            store_options={"namespace": os.environ["DENSEKV_PEER_NAMESPACE"]},
            session_cookie=session_cookie, max_age=max_age, path=path, same_site=same_site,
            https_only=https_only, domain=domain, partitioned=partitioned)


_ENTERED: list[starlette.testclient.TestClient] = []


class EnteredTestClient(starlette.testclient.TestClient):
    """A TestClient that is inside its `with` from construction to the end of the test."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.__enter__()
        _ENTERED.append(self)


if BACKEND == "densekv":
    starlette.middleware.sessions.SessionMiddleware = PeerSessionMiddleware  # type: ignore[misc]
elif BACKEND != "starlette":
    raise pytest.UsageError(f"DENSEKV_PEER_BACKEND is starlette or densekv, not {BACKEND!r}")
if CLIENT == "with":
    starlette.testclient.TestClient = EnteredTestClient  # type: ignore[misc]
elif CLIENT != "plain":
    raise pytest.UsageError(f"DENSEKV_PEER_CLIENT is plain or with, not {CLIENT!r}")


@pytest.fixture(autouse=True)
def _exit_entered_clients() -> Iterator[None]:
    yield
    while _ENTERED:
        _ENTERED.pop().__exit__(None, None, None)
