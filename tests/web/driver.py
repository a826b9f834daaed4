"""The Driver: how the shared web contract (test_contract.py) talks to a framework's test app.

Each tests/web/apps/<framework>_app.py exposes

    make_driver(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
                clock: Callable[[], float] = time.time, **store_kwargs) -> Driver

which opens a densekv store on `url` under `namespace` (the keyword arguments go to the
store) and an app whose session lives there, with the routes of the contract:

  GET  /get/<key>          {"value": session.get(key)}  (null when absent)
  GET  /all                {"data": dict(session)}
  GET  /noop               {"ok": true}; never reads nor writes the session
  POST /set/<key>          body {"value": v}: session[key] = v  -> {"ok": true}
  POST /del/<key>          del session[key] if present -> {"ok": true}
  POST /login/<int:uid>    the backend's atomic login: new cookie value, old one dead
  POST /regenerate         new cookie value, same data, old one dead
  POST /logout             end this session (server record deleted, cookie cleared)
  POST /logout-everywhere  end every session of the current identity
  POST /slow-set/<key>     like /set but sleeps SLOW_SET_S between loading and saving

The session cookie is named COOKIE. A driver is one browser: its own cookie jar, requests
in the framework's own test client (or a real server), and an unhandled error in the app
comes back as status 500, never as an exception in the test.
"""

from __future__ import annotations

from typing import Any, Protocol

COOKIE = "session"
SLOW_SET_S = 0.3


class Driver(Protocol):
    name: str  # the framework: "flask", "django", "starlette"

    def request(self, method: str, path: str, json: Any = None) -> tuple[int, Any]:
        """(status, parsed JSON body or None when the body is not JSON)."""
        ...

    def cookie(self) -> str | None:
        """The session cookie's value in this browser's jar, None if it has none."""
        ...

    def set_cookie(self, value: str | None) -> None:
        """Put `value` in the jar as the session cookie (None removes it). Values that are
        not ASCII are sent as their UTF-8 bytes."""
        ...

    def new_browser(self) -> Driver:
        """Another browser on the same app and store, with an empty cookie jar."""
        ...

    def close(self) -> None:
        """Release what make_driver opened (clients, threads); browsers share it."""
        ...


#: URLs no client can be built from, each refused when the app is set up (every shell);
#: the password in the last must not appear in the message
WRONG_URLS = ["http://127.0.0.1:6379/0", "redis://127.0.0.1:99999/0", "redis://127.0.0.1:port/0",
              "", "redis://:s3cret@127.0.0.1:6379/0?socket_timeout=soon"]
#: URLs that parse but name no server: set up without a connection (constructors do no I/O)
UNREACHED_URLS = ["redis://127.0.0.1:1/0", "redis+cluster://127.0.0.1:1", "unix:///no/such.sock"]
