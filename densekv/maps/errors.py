"""The errors a compact map raises on purpose (all DensekvError; densekv/__init__.py
exports them). KeyTooLong lives with the key layout, in maps/buckets.py."""

from __future__ import annotations

from densekv.codec import CodecError
from densekv.errors import DensekvError


class ValueTooLarge(DensekvError):
    """A value that cannot be stored compactly (a map with out_of_line=False)."""


class MapValueInvalid(CodecError, ValueError):
    """A value that would not come back equal (a tuple, which reads back as a list; NaN;
    a dict with tuple keys), or that msgpack cannot write (a set, a datetime, an int past
    2**64); raised before anything is written."""


class MapKeyInvalid(DensekvError, TypeError):
    """A map key that is neither str nor bytes; raised before anything is sent."""


class NotAnInteger(DensekvError):
    """incr/incrby on an item that does not hold an integer (or would overflow int64), or
    with a delta that is not a 64-bit integer."""


class MapConfigError(DensekvError):
    """The map stored in the server was made with another alias table or format."""


class FieldTtlUnavailable(MapConfigError):
    """ttl_mode="field" (or a map stored in that mode) on a server without hash field TTL
    (HEXPIRE: Redis 7.4+, Valkey 9+); raised before anything is written."""


class TransactionError(DensekvError):
    """A transaction that cannot run atomically (keys in several cluster slots, a
    migration in progress); raised before anything is sent."""
