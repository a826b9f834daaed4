"""How a Django session's values map onto densekv's: the identity a session is indexed
under (its ``_auth_user_id``), the base a save diffs against, and the exact comparison
that decides which top-level keys changed (1 == True, but they store apart)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import SESSION_KEY  # type: ignore[import-untyped]

from densekv.integrations.identity_flows import identity_named
from densekv.sessions.model import Identity, Session

Data = dict[str, Any]
EXPIRY_KEY = "_session_expiry"  # where SessionBase.set_expiry keeps a custom expiry


def identity_of(data: Mapping[str, Any]) -> Identity | None:
    """The densekv identity of a session: its ``_auth_user_id`` by the web shells' one rule
    (identity_flows.identity_named: the canonical decimal text of an int is that int, as
    Django writes integer primary keys; "042" stays a str), None when there is none. An
    int primary key outside densekv's int range, or another type's, is indexed as its
    text."""
    uid = data.get(SESSION_KEY)
    if uid is None or uid == "" or isinstance(uid, bool):
        return None
    if not isinstance(uid, (int, str)) or (isinstance(uid, int) and not 0 <= uid < 2**64):
        uid = str(uid)
    return identity_named(uid)


_IMMUTABLE = frozenset({str, bytes, int, float, bool, type(None)})


def copied(value: Any) -> Any:
    """A deep copy of session data for the base of the next diff: dicts and lists copied,
    the immutable scalars a decoded session holds shared, anything else copy.deepcopy'd
    (made on every load, so kept cheaper than copy.deepcopy with its memo)."""
    kind = type(value)
    if kind is dict:
        return {k: copied(v) for k, v in value.items()}
    if kind is list:
        return [copied(v) for v in value]
    return value if kind in _IMMUTABLE else copy.deepcopy(value)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == True, but they store apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


@dataclass(frozen=True)
class Stored:
    """What this object last saw stored under `token`: the base of the next diff."""

    token: str
    identity: Identity | None
    data: Data
    read: Session | None = None  # the session as get() gave it: apply(read=) then needs no read


