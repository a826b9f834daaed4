"""The errors a Bloom filter raises on purpose (all DensekvError, one line, say what to do).

A key of another type in the filter's way is densekv.errors.WrongType, like everywhere
else in densekv; the classes here are the Bloom-specific rest.
"""

from __future__ import annotations

from densekv.errors import DensekvError


class BloomParameterError(DensekvError, ValueError):
    """capacity, error_rate, growth, tightening, shards or name out of range."""


class BadBloomItem(DensekvError, TypeError):
    """An item that is not bytes, str, int or UUID (nothing was sent)."""


class BloomModuleMissing(DensekvError):
    """native=True on a server without the RedisBloom module (no BF.* commands)."""


class BloomMismatch(DensekvError):
    """A filter of this name exists with other parameters (or the other mode)."""


class BloomNotFound(DensekvError):
    """BloomFilter.open() of a name that holds no filter."""


class BloomFull(DensekvError):
    """The next growth stage would pass the 512 MB string limit of one shard."""
