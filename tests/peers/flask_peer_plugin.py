"""A pytest plugin loaded into a peer's own test suite (Flask's, Flask-Login's) run in a
subprocess by tests/peers/test_flask_suites.py: every `flask.Flask` the peer's tests make
gets densekv's session interface, on a store of its own (a fresh namespace) on the server
at DENSEKV_PEER_URL, so the peer's tests run unchanged against densekv. A test that sets
`app.session_interface` itself overrides it, as it would Flask's default, and a Flask
subclass with a session_interface of its own keeps it.

Loaded with `-p flask_peer_plugin` (this directory on PYTHONPATH); imports nothing of this
repository's tests, whose `tests` package name the peer's own tests may shadow. At the end
it deletes the namespaces it made.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import flask
import redis

import densekv
from densekv.integrations.flask import DensekvSession, SessionInterface
from densekv.sessions.store import ServerFacts, facts_from_probe

_RUN = f"peer{uuid.uuid4().hex[:10]}"
_state: dict[str, Any] = {"n": 0, "created": 0, "loaded": 0}
_original_init = flask.Flask.__init__


class CountingInterface(SessionInterface):
    """densekv's interface, counting the sessions it wrote and read back (the proof that the
    peer's tests went through densekv, not through a cookie)."""

    def _load(self, app: flask.Flask, session: DensekvSession, token: str) -> None:
        super()._load(app, session, token)
        _state["loaded"] += session.found is not None

    def _save(self, app: flask.Flask, session: DensekvSession, response: flask.Response) -> None:
        creates = self.store.create

        def counted(*args: Any, **kwargs: Any) -> str:
            token = creates(*args, **kwargs)
            _state["created"] += 1
            return token

        self.store.create = counted  # type: ignore[method-assign]
        try:
            super()._save(app, session, response)
        finally:
            del self.store.create


def _client() -> redis.Redis:
    client = _state.get("client")
    if client is None:
        client = _state["client"] = redis.Redis.from_url(os.environ["DENSEKV_PEER_URL"])
    assert isinstance(client, redis.Redis)
    return client


def _facts() -> ServerFacts:
    facts = _state.get("facts")
    if facts is None:
        facts = _state["facts"] = facts_from_probe(_client())
    assert isinstance(facts, ServerFacts)
    return facts


def _patched_init(self: flask.Flask, *args: Any, **kwargs: Any) -> None:
    _original_init(self, *args, **kwargs)
    if type(self).session_interface is not flask.Flask.session_interface:
        return  # a Flask subclass of the test's own brings its own interface: left alone
    _state["n"] += 1
    store = densekv.SessionStore(_client(), namespace=f"{_RUN}x{_state['n']}", facts=_facts())
    self.session_interface = CountingInterface(store)


def pytest_configure(config: Any) -> None:
    flask.Flask.__init__ = _patched_init  # type: ignore[method-assign]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line the caller checks: how many apps ran on densekv, how many sessions densekv
    created and how many stored sessions it read back."""
    terminalreporter.write_line(f"densekv-peer: apps={_state['n']} created={_state['created']} "
                                f"loaded={_state['loaded']}")


def pytest_unconfigure(config: Any) -> None:
    flask.Flask.__init__ = _original_init  # type: ignore[method-assign]
    client = _state.get("client")
    if client is not None:
        for key in client.scan_iter(match=f"{_RUN}x*", count=1000):
            client.delete(key)
        client.close()
