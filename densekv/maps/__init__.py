"""Compact maps: key -> small value in listpack hash buckets, me-redis style, done safely.

Public names are re-exported from densekv/__init__.py (by the lead).
"""

from densekv.maps.compact import (
    AsyncCompactMap,
    AsyncMapBatch,
    CompactMap,
    FieldTtlUnavailable,
    MapBatch,
    MapConfigError,
    MapKeyInvalid,
    MapValueInvalid,
    TransactionError,
    ValueTooLarge,
)

__all__ = [
    "AsyncCompactMap",
    "AsyncMapBatch",
    "CompactMap",
    "FieldTtlUnavailable",
    "MapBatch",
    "MapConfigError",
    "MapKeyInvalid",
    "MapValueInvalid",
    "TransactionError",
    "ValueTooLarge",
]
