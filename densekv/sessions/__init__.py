"""Session store: tokens -> {identity, expiry, small payload}, with per-identity revocation.

Public names are re-exported from densekv/__init__.py.
"""

from densekv.sessions.model import (
    Session,
    SessionDataInvalid,
    SessionDataTooLarge,
    SessionExists,
    SessionIdentityInvalid,
)
from densekv.sessions.store import (
    LAYOUTS,
    AsyncSessionStore,
    LayoutUnavailable,
    ServerFacts,
    SessionStore,
)

__all__ = ["LAYOUTS", "AsyncSessionStore", "LayoutUnavailable", "ServerFacts", "Session", "SessionDataInvalid",
           "SessionDataTooLarge", "SessionExists", "SessionIdentityInvalid", "SessionStore"]
