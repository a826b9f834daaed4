"""Random seeds for the model-based tests: the same in every process (str hashing is
randomized per process, so hash((server, layout)) was not), and named in the failure."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager


def stable_seed(*parts: object) -> int:
    """A 16-bit seed from the parts' text, equal across processes and machines."""
    return zlib.crc32("/".join(map(str, parts)).encode()) & 0xFFFF


@contextmanager
def shows_seed(seed: int) -> Iterator[None]:
    """Re-raise an AssertionError with the seed in front, so a failure can be replayed."""
    try:
        yield
    except AssertionError as exc:
        raise AssertionError(f"[seed={seed}] {exc}") from exc
