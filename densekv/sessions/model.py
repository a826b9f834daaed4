"""Sessions as values: tokens, digests, the Session a caller sees and the Record we store.

Tokens are 24 random bytes from `secrets` (192 bits) as 32 URL-safe characters. A store
also accepts any 22-86 URL-safe characters as a token, so a session moved in from another
store (Django's 32-character keys, Flask-Session's 43) keeps its cookie value. The server
never sees a token: every layout keys a session by its *digest*, the first 16 bytes (128
bits) of SHA-256(token), so a dump of the server yields no usable cookie. A string that
is not a well-formed token (wrong length, wrong alphabet, not ASCII, huge) has no digest:
`digest_of` returns None and every lookup answers "not found" without asking the server.

Expiry: `expires_at` is the moment the session stops working (unix seconds). With an idle
TTL it moves on each touch but never past `absolute_at`, the hard limit set at creation.
A store's `Lifetime` (its ttl and idle_ttl) makes both for a new or renewed record.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from densekv.errors import DensekvError, InvalidArgument
from densekv.errors import SessionIdentityInvalid as _SessionIdentityInvalid
from densekv.errors import moved as _moved

__all__ = ["MAX_STR_IDENTITY", "Device", "Identity", "Lifetime", "Record", "Session", "check_identity", "check_owner",
           "digest_of", "identity_bytes", "new_token", "well_formed"]
TOKEN_BYTES = 24
TOKEN_CHARS = 32  # base64url of 24 bytes, no padding
TOKEN_MIN, TOKEN_MAX = 22, 86  # what a store accepts (moved-in sessions keep their cookie)
DIGEST_BYTES = 16
_TOKEN_RE = re.compile(r"\A[A-Za-z0-9_-]{22,86}\Z")

Identity = int | str


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def well_formed(token: object) -> TypeGuard[str]:
    """Whether `token` could name a session (its shape, no hash): the web backends ask
    this before any server call, so a junk cookie costs none."""
    return isinstance(token, str) and TOKEN_MIN <= len(token) <= TOKEN_MAX and _TOKEN_RE.match(token) is not None


def digest_of(token: object) -> bytes | None:
    """The stored digest of a well-formed token, or None for anything else."""
    if not well_formed(token):
        return None
    return hashlib.sha256(token.encode("ascii")).digest()[:DIGEST_BYTES]


def check_owner(identity: object) -> Identity | None:
    """A session's owner: an identity, or None for an anonymous session."""
    return None if identity is None else check_identity(identity)


#: The longest str identity, in UTF-8 bytes: the identity index stores b"s" + the
#: identity behind a one-byte length (densekv/sessions/index.py), so 254 is what fits.
MAX_STR_IDENTITY = 254


def check_identity(identity: object) -> Identity:
    """The identity, if every layout and the identity index can store it and give it back."""
    if isinstance(identity, bool) or not isinstance(identity, (int, str)):
        raise _SessionIdentityInvalid(f"identity is an int >= 0 or a non-empty str, not {type(identity).__name__}")
    if isinstance(identity, int) and not 0 <= identity < 2**64:
        raise _SessionIdentityInvalid("an int identity is in 0 .. 2**64-1")
    if isinstance(identity, str):
        try:
            size = len(identity.encode())
        except UnicodeEncodeError:
            raise _SessionIdentityInvalid("a str identity is UTF-8 text (this one holds a lone surrogate)") from None
        if not 0 < size <= MAX_STR_IDENTITY:
            raise _SessionIdentityInvalid(f"a str identity is 1 to {MAX_STR_IDENTITY} bytes of UTF-8, not {size}")
        return str(identity)  # a str subclass comes back as str: store what will be read
    return int(identity)


def identity_bytes(identity: Identity) -> bytes:
    """The identity as stored in the index: ints as minimal big-endian, strs as UTF-8.

    A leading b"s" byte marks strings so that the int 7 and the str "\\x07" differ.
    """
    if isinstance(identity, int):
        return identity.to_bytes(max(1, (identity.bit_length() + 7) // 8), "big")
    return b"s" + identity.encode()


@dataclass(frozen=True, slots=True)
class Device:
    """What a store with track_devices=True knows of a session's device (sessions_of):
    when it logged in, when it was last seen (at the touch granularity: the last roll of
    its idle expiry, so within a quarter of idle_ttl; without idle_ttl, its login), and
    the label the app gave at login (None if none)."""

    created_at: int
    last_seen: int
    label: str | None


@dataclass(frozen=True)
class Session:
    """What `SessionStore.get` returns. `id` is the digest in hex: safe to show or log,
    useless as a cookie. Sessions listed by `sessions_of` have token "" (the server
    never had it) and can be ended with `destroy_id(session.id)`."""

    token: str
    identity: Identity | None  # None: an anonymous session
    expires_at: int
    data: dict[str, Any] | None = None
    id: str = ""
    absolute_at: int = 0  # the hard end of its life: idle rolling never passes it
    device: Device | None = None  # sessions_of() of a store with track_devices=True
    # the record as read (opaque): `apply(..., read=session)` writes against it without
    # reading the session again (one round trip for a web save); not compared, not shown
    read: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Record:
    """A session as stored: its digest, owner, expiry and payload.

    `data` is the payload as a dict once decoded; the partitioned layouts read `payload`
    (the framed bytes, densekv/sessions/payload.py) and the store decodes it. `outside`:
    the payload is not all inline (split, `part` holding its first part, `here` saying where
    its rest is, or out of line);
    `raw` is the stored record exactly as read (compare-and-set in `apply`), `ool` the
    continuation or out-of-line value read with it."""

    digest: bytes
    identity: Identity | None
    expires_at: int
    absolute_at: int  # == expires_at when there is no idle TTL
    data: dict[str, Any] | None = None
    payload: bytes | None = None
    outside: bool = False
    raw: bytes = b""
    ool: bytes | None = None
    part: bytes | None = None  # a split payload's first part (the rest: the continuation)
    #: a split payload's rest is in the continuation field of the record's own partition
    #: hash (one HMGET reads both); False: in the separate continuation hash (densekv 0.1.0's layout)
    here: bool = False

    def live(self, now: int) -> bool:
        return self.expires_at > now

    def session(self, token: str) -> Session:
        return Session(token, self.identity, self.expires_at, self.data, self.digest.hex(), self.absolute_at,
                       read=self)


TOUCH_GAIN = 0.25  # due_for_touch: roll the idle expiry once this part of the window has passed


@dataclass(frozen=True, slots=True)
class Lifetime:
    """A store's session lifetimes: `ttl` seconds from creation at most (a record's
    absolute_at) and, with `idle_ttl`, that many seconds from the last touch (its
    expires_at). SessionCore holds one (`core.lifetime`); frozen: made once, by `of`."""

    ttl: int
    idle_ttl: int | None

    @classmethod
    def of(cls, ttl: int, idle_ttl: int | None) -> Lifetime:
        """A store's lifetimes, checked (InvalidArgument)."""
        if not 1 <= ttl < 2**31 or (idle_ttl is not None and not 1 <= idle_ttl < 2**31):
            raise InvalidArgument("ttl and idle_ttl are numbers of seconds from 1 to 2**31 - 1")
        return cls(int(ttl), int(idle_ttl) if idle_ttl else None)

    def seconds(self, ttl: object, now: int) -> int:
        """A create's ttl in seconds (None: the store's), or InvalidArgument: a session
        that would be dead at once, or whose expiry a record cannot hold (u32 seconds,
        2106), is refused before anything is written."""
        if ttl is None:
            seconds = self.ttl
        elif isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 1 <= ttl < 2**32:
            raise InvalidArgument(f"ttl is a number of seconds from 1 (or None for the store's {self.ttl}), "
                                  f"not {ttl!r}")
        else:
            seconds = int(ttl)
        if now + seconds >= 2**32:
            raise InvalidArgument(f"a ttl of {seconds} s ends after 2106, past what a session record holds")
        return seconds

    def expiries(self, now: int, seconds: int) -> tuple[int, int]:
        """(expires_at, absolute_at) of a record that lives `seconds` from `now`."""
        absolute = now + seconds
        return (min(absolute, now + self.idle_ttl) if self.idle_ttl else absolute), absolute

    def due_for_touch(self, session: Session, now: int) -> bool:
        """True when TOUCH_GAIN of the idle window has passed since the expiry was last
        rolled and a touch would still move it (so a backend writes on a few requests,
        not on every one, and an active session never idles out)."""
        if self.idle_ttl is None:
            return False
        target = min(session.absolute_at or session.expires_at, now + self.idle_ttl)
        return target > session.expires_at and session.expires_at - now <= self.idle_ttl * (1 - TOUCH_GAIN)


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("SessionDataInvalid", "SessionDataTooLarge", "SessionExists", "SessionIdentityInvalid")


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
