"""Compact maps: key -> small value in listpack hash buckets, me-redis style, done safely.

Public names are re-exported from densekv/__init__.py (by the lead).
"""

from densekv.errors import DensekvError
from densekv.errors import moved as _moved
from densekv.maps.compact import AsyncCompactMap, AsyncMapBatch, CompactMap, MapBatch

__all__ = [
    "AsyncCompactMap",
    "AsyncMapBatch",
    "CompactMap",
    "MapBatch",
]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("FieldTtlUnavailable", "MapConfigError", "MapKeyInvalid", "MapValueInvalid",
          "TransactionError", "ValueTooLarge")


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
