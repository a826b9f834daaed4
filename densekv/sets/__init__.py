"""Compact sets of fixed-size IDs and families of small sets.

Public names are re-exported from densekv/__init__.py. (The Bloom filter lives in
densekv/sets/bloom*.py and is imported from there, not from here.)
"""

from densekv.sets.compact import AsyncCompactSet, CompactSet, SetMismatch
from densekv.sets.family import AsyncSetFamily, SetFamily
from densekv.sets.items import BadItem, ItemCodec
from densekv.sets.layouts import LAYOUTS, SetLimits

__all__ = ["LAYOUTS", "AsyncCompactSet", "AsyncSetFamily", "BadItem", "CompactSet", "ItemCodec",
           "SetFamily", "SetLimits", "SetMismatch"]
