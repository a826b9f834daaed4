"""Deprecated: the analyzer's error, AnalyzeError, is defined in densekv/errors.py now.

This module only keeps its old import path working, with a DeprecationWarning that names
the new one, for one minor release (CHANGELOG.md lists every move).
"""

from __future__ import annotations

from densekv.errors import DensekvError
from densekv.errors import moved as _moved

#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("AnalyzeError",)

__all__: list[str] = []


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
