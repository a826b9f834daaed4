"""Deprecated: the errors a compact map raises are defined in densekv/errors.py now.

This module only keeps their old import path working, with a DeprecationWarning that
names the new one, for one minor release (CHANGELOG.md lists every move).
"""

from __future__ import annotations

from densekv.errors import DensekvError
from densekv.errors import moved as _moved

#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("FieldTtlUnavailable", "MapConfigError", "MapKeyInvalid", "MapValueInvalid",
          "NotAnInteger", "TransactionError", "ValueTooLarge")

__all__: list[str] = []


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
