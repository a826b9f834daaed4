"""The errors a compact map raises on purpose (all DensekvError; densekv/__init__.py
exports them). KeyTooLong lives with the key layout, in maps/buckets.py."""

from __future__ import annotations

from densekv.errors import DensekvError


class ValueTooLarge(DensekvError):
    """A value that cannot be stored compactly (a map with out_of_line=False)."""


class NotAnInteger(DensekvError):
    """incr/incrby on an item that does not hold an integer (or would overflow int64)."""


class MapConfigError(DensekvError):
    """The map stored in the server was made with another alias table or format."""


class FieldTtlUnavailable(MapConfigError):
    """ttl_mode="field" (or a map stored in that mode) on a server without hash field TTL
    (HEXPIRE: Redis 7.4+, Valkey 9+); raised before anything is written."""


class TransactionError(DensekvError):
    """A transaction that cannot run atomically (keys in several cluster slots, a
    migration in progress); raised before anything is sent."""
