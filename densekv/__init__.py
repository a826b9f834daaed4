"""densekv: sessions, sets and key/values in Redis or Valkey in a fraction of the memory.

This module is the one public import path; everything else is an implementation module.
"""

from densekv.bulk import BulkLoadError, bulk_load
from densekv.codec import CodecUnavailable
from densekv.connect import connect
from densekv.errors import (
    BinaryMissing,
    DecodeError,
    DensekvError,
    InvalidArgument,
    NotDurable,
    PortInUse,
    ServerStartFailed,
    ServerTooOld,
    ServerUnavailable,
    WriteInDoubt,
    WrongType,
)
from densekv.maps import (
    AsyncCompactMap,
    AsyncMapBatch,
    CompactMap,
    MapBatch,
    TransactionError,
    ValueTooLarge,
)
from densekv.maps.buckets import KeyTooLong
from densekv.maps.compact import (
    FieldTtlUnavailable,
    MapConfigError,
    MapKeyInvalid,
    MapValueInvalid,
    NotAnInteger,
)
from densekv.measure import Curve, Meter, Point
from densekv.plan import (
    AsyncClusterExecutor,
    AsyncExecutor,
    ClusterExecutor,
    Plan,
    SyncExecutor,
    executor_for,
)
from densekv.planner import Recommendation
from densekv.planner import plan as plan_layout
from densekv.server.binaries import MATRIX, ServerBinary, find_servers
from densekv.server.embedded import EmbeddedServer, embedded
from densekv.server.probe import Capabilities, probe
from densekv.sessions import (
    AsyncSessionStore,
    LayoutUnavailable,
    Session,
    SessionDataInvalid,
    SessionDataTooLarge,
    SessionExists,
    SessionIdentityInvalid,
    SessionStore,
)
from densekv.sets import (
    AsyncCompactSet,
    AsyncSetFamily,
    BadItem,
    CompactSet,
    SetFamily,
    SetMismatch,
)
from densekv.sets.bloom import AsyncBloomFilter, BloomFilter

__version__ = "0.1.0"

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
