"""The contract's Flask app (routes in tests/web/driver.py) on densekv.integrations.flask,
and its Driver over Flask's own test client. `wsgi_app_from_env()` builds the same app for
a real WSGI server (gunicorn) from DENSEKV_WEB_URL and DENSEKV_WEB_NAMESPACE."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis
from flask import Flask, jsonify, request, session
from flask.typing import ResponseReturnValue

import densekv
from densekv.connect import from_url
from densekv.integrations.flask import DensekvSession, FlaskSessionFallback, SessionInterface
from tests.web.driver import COOKIE, SLOW_SET_S


def _session() -> DensekvSession:
    current = session._get_current_object()  # type: ignore[attr-defined]
    assert isinstance(current, DensekvSession)
    return current


def make_app(store: densekv.SessionStore | None, *, config: Mapping[str, Any] | None = None,
             fallback: FlaskSessionFallback | None = None,
             interface: SessionInterface | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(SESSION_COOKIE_NAME=COOKIE, **(config or {}))
    if interface is None:
        assert store is not None
        interface = SessionInterface(store, fallback=fallback)
    app.session_interface = interface

    @app.get("/get/<key>")
    def get(key: str) -> ResponseReturnValue:
        return jsonify(value=session.get(key))

    @app.get("/all")
    def all_() -> ResponseReturnValue:
        return jsonify(data=dict(session))

    @app.get("/noop")
    def noop() -> ResponseReturnValue:
        return jsonify(ok=True)

    @app.post("/set/<key>")
    def set_(key: str) -> ResponseReturnValue:
        session[key] = (request.get_json() or {}).get("value")
        return jsonify(ok=True)

    @app.post("/slow-set/<key>")
    def slow_set(key: str) -> ResponseReturnValue:
        value = (request.get_json() or {}).get("value")
        _session()  # loaded (open_session) before the sleep, saved after it
        time.sleep(SLOW_SET_S)
        session[key] = value
        return jsonify(ok=True)

    @app.post("/del/<key>")
    def del_(key: str) -> ResponseReturnValue:
        session.pop(key, None)
        return jsonify(ok=True)

    @app.post("/login/<int:uid>")
    def login(uid: int) -> ResponseReturnValue:
        _session().login(uid)
        return jsonify(ok=True)

    @app.post("/regenerate")
    def regenerate() -> ResponseReturnValue:
        _session().regenerate()
        return jsonify(ok=True)

    @app.post("/logout")
    def logout() -> ResponseReturnValue:
        _session().destroy()
        return jsonify(ok=True)

    @app.post("/logout-everywhere")
    def logout_everywhere() -> ResponseReturnValue:
        _session().logout_everywhere()
        return jsonify(ok=True)

    return app


class FlaskDriver:
    """One browser: a Flask test client with its own cookie jar."""

    name = "flask"

    def __init__(self, app: Flask, owned: redis.Redis | redis.RedisCluster | None = None) -> None:
        self.app = app
        self.client = app.test_client()
        self._owned = owned

    def request(self, method: str, path: str, json: Any = None) -> tuple[int, Any]:
        response = self.client.open(path, method=method, json=json)
        return response.status_code, response.get_json(silent=True)

    def cookie(self) -> str | None:
        found = self.client.get_cookie(COOKIE)
        return None if found is None else found.value

    def set_cookie(self, value: str | None) -> None:
        if value is None:
            self.client.delete_cookie(COOKIE)
        else:
            self.client.set_cookie(COOKIE, value)

    def new_browser(self) -> FlaskDriver:
        return FlaskDriver(self.app)

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()


def make_store(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
               clock: Callable[[], float] = time.time, **store_kwargs: Any) -> densekv.SessionStore:
    client = from_url(url)  # connect and read timeouts, as the docs say
    return densekv.SessionStore(client, namespace=namespace, ttl=ttl, idle_ttl=idle_ttl,
                                clock=clock, **store_kwargs)


def make_driver(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
                clock: Callable[[], float] = time.time, observer: Any = None,
                device_label: Callable[[Any], str | None] | None = None,
                **store_kwargs: Any) -> FlaskDriver:
    """`observer`: attached to the app's store; `device_label`: the interface's hook."""
    store = make_store(url, namespace, ttl=ttl, idle_ttl=idle_ttl, clock=clock, **store_kwargs)
    if observer is not None:
        store.observe(observer)
    interface = SessionInterface(store, device_label=device_label)
    return FlaskDriver(make_app(None, interface=interface), owned=store.client)


def wsgi_app_from_env() -> Flask:
    """For `gunicorn 'tests.web.apps.flask_app:wsgi_app_from_env()'`: the store configured
    from a URL as docs/flask.md says, built in each worker on its first session use (also
    under --preload, where this runs once in the master before the fork)."""
    interface = SessionInterface.from_url(os.environ["DENSEKV_WEB_URL"],
                                          namespace=os.environ["DENSEKV_WEB_NAMESPACE"], ttl=3600)
    return make_app(None, interface=interface)


def make_flask_login_app(store: densekv.SessionStore | None, *,
                         config: Mapping[str, Any] | None = None,
                         fallback: FlaskSessionFallback | None = None,
                         interface: SessionInterface | None = None) -> Flask:
    """The same store behind Flask-Login, with no densekv call in the views: login_user(),
    logout_user() and the remember-me cookie alone must drive densekv's login and logout."""
    from flask_login import (  # type: ignore[import-untyped]
        LoginManager,
        UserMixin,
        current_user,
        login_user,
        logout_user,
    )

    class User(UserMixin):  # type: ignore[misc]
        def __init__(self, uid: str) -> None:
            self.id = uid

    app = make_app(store, config={"SECRET_KEY": "flask-login needs one for its remember cookie",
                                  **(config or {})}, fallback=fallback, interface=interface)
    manager = LoginManager(app)
    manager.user_loader(User)

    @app.post("/fl/login/<uid>")
    def fl_login(uid: str) -> ResponseReturnValue:
        remember = request.args.get("remember") == "1"
        login_user(User(uid), remember=remember)
        if remember:
            session.permanent = True
        return jsonify(ok=True)

    @app.post("/fl/logout")
    def fl_logout() -> ResponseReturnValue:
        logout_user()
        return jsonify(ok=True)

    @app.get("/fl/whoami")
    def fl_whoami() -> ResponseReturnValue:
        return jsonify(user=current_user.get_id() if current_user.is_authenticated else None)

    return app
