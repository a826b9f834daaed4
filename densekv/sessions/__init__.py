"""Session store: tokens -> {identity, expiry, small payload}, with per-identity revocation.

Public names are re-exported from densekv/__init__.py.
"""

from densekv.errors import DensekvError
from densekv.errors import moved as _moved
from densekv.sessions.model import Session
from densekv.sessions.store import LAYOUTS, AsyncSessionStore, ServerFacts, SessionStore

__all__ = ["LAYOUTS", "AsyncSessionStore", "ServerFacts", "Session", "SessionStore"]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("LayoutUnavailable", "SessionDataInvalid", "SessionDataTooLarge", "SessionExists",
          "SessionIdentityInvalid")


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
