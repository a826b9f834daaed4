"""A pytest plugin for the subprocess that runs Quart's own session tests (vendored, unchanged,
under tests/peers/vendored/quart-*/; tests/peers/test_quart_suite.py starts it with
`-p quart_peer_plugin`, this directory on PYTHONPATH). Loaded before Quart's conftest and
test modules are imported, it sets up what the environment asks for:

* DENSEKV_PEER_BACKEND=densekv: densekv's session interface and session class take the
  place of Quart's cookie session everywhere those tests reach it:
  `quart.sessions.SecureCookieSessionInterface` becomes PeerSessionInterface (densekv's
  SessionInterface built with no arguments, as Quart's is, on DENSEKV_PEER_URL and
  namespace DENSEKV_PEER_NAMESPACE: one store per event loop, each test's loop its own),
  `quart.sessions.SecureCookieSession` becomes densekv's DensekvSession (what that
  interface opens and saves), and `Quart.session_interface`, the default every app
  starts with, is a PeerSessionInterface. "quart" (the control) leaves Quart's own.
* DENSEKV_PEER_REPORT: a file that gets {test id: "passed" | "failed" | "skipped"} as JSON
  (tests/peers/peer_report.py, loaded beside this plugin).
"""

from __future__ import annotations

import os

import pytest
import quart.app
import quart.sessions

from densekv.integrations.flask_session import DensekvSession
from densekv.integrations.quart import SessionInterface
from densekv.sessions.store import AsyncSessionStore

BACKEND = os.environ.get("DENSEKV_PEER_BACKEND", "quart")


class PeerSessionInterface(SessionInterface):
    """densekv's interface called as Quart's SecureCookieSessionInterface is (no
    arguments): SessionInterface.from_url's store per event loop, on the test's server."""

    def __init__(self) -> None:
        url, namespace = os.environ["DENSEKV_PEER_URL"], os.environ["DENSEKV_PEER_NAMESPACE"]

        def build() -> AsyncSessionStore:
            from densekv.connect import from_url

            return AsyncSessionStore(from_url(url, asyncio=True), namespace=namespace)

        super().__init__(build)


if BACKEND == "densekv":  # (mypy: Quart's own classes, replaced on purpose)
    sessions = quart.sessions
    sessions.SecureCookieSessionInterface = PeerSessionInterface  # type: ignore[misc,assignment]
    sessions.SecureCookieSession = DensekvSession  # type: ignore[misc,assignment]
    quart.app.Quart.session_interface = PeerSessionInterface()  # type: ignore[assignment]
elif BACKEND != "quart":
    raise pytest.UsageError(f"DENSEKV_PEER_BACKEND is quart or densekv, not {BACKEND!r}")
