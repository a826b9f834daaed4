"""Every error densekv raises on purpose.

They all derive from DensekvError, carry a one-line message that says what to do,
and map to exit code 2 in the CLI (never a traceback). Server replies that are not
densekv's fault (a redis-py ConnectionError in the middle of a run) are wrapped in
ServerUnavailable where densekv can tell.
"""

from __future__ import annotations


class DensekvError(Exception):
    """Base class: a clear, one-line, user-facing problem."""

    exit_code = 2


class ServerUnavailable(DensekvError):
    """The server at a URL does not answer (or stopped answering)."""


class ServerTooOld(DensekvError):
    """densekv needs Redis/Valkey >= 6.2 (GETDEL, ZRANGESTORE, EXAT, listpack era)."""


class BinaryMissing(DensekvError):
    """A server binary of the matrix is not on this machine, or does not run."""


class PortInUse(DensekvError):
    """The loopback port asked for is taken by another process."""


class InvalidArgument(DensekvError, ValueError):
    """An argument densekv refuses before doing anything (a port outside 1-65535, a
    partition count that is not a power of two, ...); nothing was started or written."""


class ServerStartFailed(DensekvError):
    """A server process started but never answered, or exited at once."""


class ScriptError(DensekvError):
    """A densekv Lua script failed on the server (bug or wrong key type)."""


class PlanError(DensekvError):
    """A plan cannot run as built (keys in several slots for an atomic plan, ...)."""


class WrongType(DensekvError):
    """A key that densekv would write already holds a value of another type."""


class DecodeError(DensekvError):
    """A stored value does not decode; the message names the key (and item)."""

    def __init__(self, message: str, *, key: bytes | str | None = None) -> None:
        super().__init__(message)
        self.key = key


class NotDurable(DensekvError):
    """A store opened with durable=True wrote, but no replica acknowledged the write
    (WAIT) in time: it is on the primary, and a failover now could lose it."""


class WriteInDoubt(ServerUnavailable):
    """The server was lost after a write was sent and before its reply came back: it may
    or may not have been applied. densekv never sends it again by itself (see
    densekv/cluster_executor.py); read back, or repeat it if the operation is idempotent."""


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["BinaryMissing", "DecodeError", "DensekvError", "InvalidArgument", "NotDurable", "PlanError",
           "PortInUse", "ScriptError", "ServerStartFailed", "ServerTooOld", "ServerUnavailable",
           "WriteInDoubt", "WrongType"]
