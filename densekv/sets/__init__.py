"""Compact sets of fixed-size IDs and families of small sets.

Public names are re-exported from densekv/__init__.py. (The Bloom filter lives in
densekv/sets/bloom*.py and is imported from there, not from here.)
"""

from densekv.errors import DensekvError
from densekv.errors import moved as _moved
from densekv.sets.compact import AsyncCompactSet, CompactSet
from densekv.sets.family import AsyncSetFamily, SetFamily
from densekv.sets.items import ItemCodec
from densekv.sets.layouts import LAYOUTS, SetLimits

__all__ = ["LAYOUTS", "AsyncCompactSet", "AsyncSetFamily", "CompactSet", "ItemCodec",
           "SetFamily", "SetLimits"]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("BadItem", "SetMismatch")


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
