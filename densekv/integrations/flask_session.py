"""Flask's `session` object for densekv (densekv/integrations/flask.py's DensekvSession): a
dict that loads the stored session on its first use of any kind and knows what the
request changed, and the tagged form Flask's own cookie session gives values (flash()'s
tuples, datetimes, UUIDs, Markup come back as themselves). Kept apart from the interface
so each module has one job: this one is the request's view of a session, the interface
(flask.py) decides what to read and write."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from flask.sessions import SessionMixin, session_json_serializer

from densekv.integrations.devices import session_id
from densekv.integrations.identity_flows import identity_forms, switches
from densekv.integrations.identity_flows import identity_named as identity_of
from densekv.integrations.tracked import TrackedDict
from densekv.sessions.model import Identity, Session

__all__ = ["DensekvSession", "identity_forms", "identity_of", "tag_value", "untag_data", "untag_value"]

MISSING = object()


#: types Flask's tagged JSON leaves as they are (exact types: Markup is a str subclass)
_UNTAGGED = frozenset({str, int, float, bool, type(None)})


def tag_value(value: Any) -> Any:
    """A session value as stored: Flask's tagged-JSON form of it (a plain scalar as it is,
    without walking Flask's eight tags: a save compares every key this way)."""
    if type(value) in _UNTAGGED:
        return value
    return session_json_serializer.tag(value)


def untag_data(data: dict[str, Any]) -> dict[str, Any]:
    """untag_value of every value of a stored session's data: `data` itself when no value
    is a dict or a list (only those can hold a tag), as most sessions are."""
    for value in data.values():
        if isinstance(value, (dict, list)):
            return {k: untag_value(v) for k, v in data.items()}
    return data


def untag_value(value: Any) -> Any:
    """The inverse of tag_value, over nested dicts and lists."""
    if isinstance(value, dict):
        return session_json_serializer.untag({k: untag_value(v) for k, v in value.items()})
    if isinstance(value, list):
        return [untag_value(v) for v in value]
    return value


class DensekvSession(TrackedDict, SessionMixin):
    """`flask.session` under densekv: a dict, read from the store on its first use, that
    knows what the request changed. When the response is saved, only the top-level keys
    set in the request or whose value differs from what was read are written, and the keys
    removed are deleted (a value changed in place needs `session.modified = True`, as with
    Flask's own session). login(), regenerate(), logout_everywhere() and destroy() take
    effect then too.
    """

    # per-request state; the immutable defaults live on the class (a request builds one
    # session, so setting a dozen attributes in __init__ is a measurable part of a read)
    loader: Callable[[DensekvSession], None] | None = None  # set: not read yet; first use reads it
    token: str | None = None
    found: Session | None = None
    new = True
    """True for a session not stored yet (Flask's own cookie session always says False)."""
    modified = False
    _accessed = False
    cleared = False
    login_as: Identity | None = None
    regenerate_asked = False
    stale: str | None = None  # a cookie's token the store did not give a session for
    end_all: Identity | None = None
    failed = False  # a load or save raised: Flask's error path must not save
    after_view = False  # the view returned: only after-request hooks use the session now
    unavailable: BaseException | None = None  # a load after the view failed: served empty

    def __init__(self, data: Mapping[str, Any] | None = None, *, token: str | None = None,
                 found: Session | None = None, stored: Mapping[str, Any] | None = None,
                 loader: Callable[[DensekvSession], None] | None = None) -> None:
        if data:
            dict.update(self, data)
        if loader is not None:
            self.loader = loader
        if token is not None:
            self.token, self.new = token, False
        if found is not None:
            self.found = found
        self.stored: dict[str, Any] = dict(stored) if stored else {}
        self.set_keys: set[str] = set()
        self.deleted_keys: set[str] = set()
        self.ended: list[str] = []  # tokens to destroy at save time

    @property
    def accessed(self) -> bool:
        return self._accessed

    @accessed.setter
    def accessed(self, value: bool) -> None:
        """Flask (3.1.3+) sets this on every use of `flask.session` in a request: the
        session is read from the store then, so a request that never uses it makes no
        server call."""
        self._accessed = value
        if value and self.loader is not None:
            self.read()

    def view_returned(self, response: Any) -> Any:
        """An after_this_request function (the first of the after-request functions to
        run): from here on a load that finds the server unavailable leaves the session empty
        instead of failing the response (flask.py `_load`)."""
        self.after_view = True
        return response

    def read(self) -> None:
        """Read the session from the store unless done already."""
        if self.loader is not None:
            loader, self.loader = self.loader, None
            try:
                loader(self)
            except BaseException:
                self.failed = True
                raise

    def loaded(self, data: Mapping[str, Any], token: str, found: Session | None,
               stored: Mapping[str, Any]) -> None:
        """Fill a session read from the store (no change is recorded)."""
        dict.update(self, data)
        self.token, self.found, self.stored, self.new = token, found, dict(stored), False

    def load_done(self, token: str) -> None:
        """The load of the cookie's `token` is over: a token that filled nothing (expired,
        never issued, not decodable, nothing moved in) is stale, replaced when the session
        is written."""
        if self.token is None:
            self.stale = token

    def served_empty(self, error: BaseException) -> None:
        """A load after the view failed with `error` (the server unavailable): the response
        is served with the session empty; a change made to it after that raises `error`."""
        self.unavailable = error

    def mark_accessed(self) -> None:
        """The request used the session (Vary: Cookie), without reading it again."""
        self._accessed = True

    def follow_login(self, identity: Identity) -> None:
        """Log in as `identity` at save, as the session's data names it (Flask-Login's
        `_user_id`; flasklike.follow_identity_key has dropped another user's data first)."""
        self.login_as = identity

    @property
    def identity(self) -> Identity | None:
        """Who the session belongs to (a pending login() counts), or None."""
        self.read()
        if self.login_as is not None:
            return self.login_as
        return self.found.identity if self.found is not None else None

    @property
    def id(self) -> str | None:
        """The id the stored session is listed under (`Session.id` in store.sessions_of,
        what store.destroy_id takes), None while none is stored: a "your devices" page marks
        "this device" with it. It names the session as the request read it (a login or
        regenerate of this request gives it a new one at save time)."""
        self.read()
        return session_id(self.token)

    # -- every use of the dict reads it first ------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        if self.loader is not None:
            self.read()
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        if self.loader is not None:
            self.read()
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        if self.loader is not None:
            self.read()
        return dict.__contains__(self, key)

    def __iter__(self) -> Iterator[str]:
        self.read()
        return super().__iter__()

    def __reversed__(self) -> Iterator[str]:
        self.read()
        return super().__reversed__()

    def __len__(self) -> int:
        if self.loader is not None:
            self.read()
        return dict.__len__(self)

    def keys(self) -> Any:
        self.read()
        return super().keys()

    def values(self) -> Any:
        self.read()
        return super().values()

    def items(self) -> Any:
        self.read()
        return super().items()

    def copy(self) -> dict[str, Any]:
        self.read()
        return dict(super().items())

    def __eq__(self, other: object) -> bool:
        self.read()
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        self.read()
        return super().__ne__(other)

    __hash__ = None  # type: ignore[assignment]

    def __or__(self, other: Any) -> Any:
        self.read()
        return dict(super().items()) | other

    def __ror__(self, other: Any) -> Any:
        self.read()
        return other | dict(super().items())

    def __repr__(self) -> str:
        self.read()
        return f"<{type(self).__name__} {super().__repr__()}>"

    def __setitem__(self, key: str, value: Any) -> None:
        self.read()
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.read()
        super().__delitem__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.read()
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, Any]:
        self.read()
        return super().popitem()

    def setdefault(self, key: str, default: Any = None) -> Any:
        self.read()
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.read()
        super().update(*args, **kwargs)

    def clear(self) -> None:
        self.read()
        super().clear()

    # -- the densekv actions, applied by save_session -----------------------------------
    def login(self, identity: Identity) -> None:
        """Attach `identity` in one atomic step at save time: new cookie, old one dead.
        A session of another user is emptied first (its data is that user's): what this
        request sets after login() is kept. A decimal str is its int (identity_of)."""
        identity = identity_of(identity)
        if switches(self.identity, identity):  # another user's data: the old session ends
            self.restart(keep={})
        self.login_as = identity
        self.modified = True

    def regenerate(self) -> None:
        """New cookie value at save time, same data and identity; the old value dies."""
        self.read()
        self.regenerate_asked = True
        self.modified = True

    def destroy(self) -> None:
        """End this session (server record and cookie); later writes start a new one."""
        self.restart(keep={})

    def logout_everywhere(self) -> None:
        """End every session of this session's identity (this one included)."""
        self.read()
        identity = self.found.identity if self.found is not None else None
        if identity is not None:
            self.end_all = identity
        self.destroy()

    def restart(self, keep: Mapping[str, Any]) -> None:
        """End the stored session (at save time) and go on as a new anonymous one holding
        `keep`: written under a new token if not empty."""
        self.read()
        if self.token is not None:
            self.ended.append(self.token)
        self.token, self.found, self.login_as = None, None, None
        self.regenerate_asked = False
        self.stored.clear()
        dict.clear(self)
        dict.update(self, keep)
        self.set_keys = set(keep)
        self.deleted_keys.clear()
        self.modified = True

    # -- change tracking -------------------------------------------------------------------
    def _set(self, key: str) -> None:
        self.set_keys.add(key)
        self.deleted_keys.discard(key)
        self.modified = True

    def _deleted(self, key: str) -> None:
        self.deleted_keys.add(key)
        self.set_keys.discard(key)
        self.modified = True

    def _on_clear(self) -> None:
        self.cleared = True
        self.modified = True

    def tagged(self) -> dict[str, Any]:
        """All data in stored form (for a new session)."""
        return {k: tag_value(v) for k, v in self.items()}

    def changes(self) -> tuple[dict[str, Any], list[str]]:
        """(changed keys with their stored form, removed keys) against what was loaded."""
        changed: dict[str, Any] = {}
        for key, value in self.items():
            tagged = tag_value(value)
            if key in self.set_keys or self.stored.get(key, MISSING) != tagged:
                changed[key] = tagged
        removed = [k for k in self.stored if k not in self]
        return changed, removed
