"""The old import paths of the modules that moved (issue 33), kept for one minor release.

A module that moved leaves behind a small module at its old path whose only content is a
PEP 562 `__getattr__` made by `forward`: any name read from the old module is the new
module's own object, with a DeprecationWarning that names the new path (at the user's line,
as `errors.moved` does for the errors). The new module is imported on first access only, so
importing an old path loads nothing of a tool. Nothing in densekv imports an old path
(`tests/unit/test_layers.py`); CHANGELOG.md lists every move.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Collection
from typing import Any

from densekv.errors import moved


def forward(old: str, new: str, errors: Collection[str] = ()) -> Callable[[str], Any]:
    """The `__getattr__` of the module left at `old`: a name resolves to `new`'s attribute
    with a warning naming `new`; the `errors` the old module used to keep for densekv.errors
    (issue 33's error moves) still resolve there, with their own warning."""

    def __getattr__(name: str) -> Any:
        if name in errors:
            return moved(old, name, errors)
        if name.startswith("__"):  # module machinery (__path__, __file__ lookups) is not a name
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(new), name)  # AttributeError as before
        warnings.warn(f"{old}.{name} moved to {new}.{name}: import it from there "
                      "(the old path goes in the next minor release)", DeprecationWarning, stacklevel=2)
        return value

    return __getattr__


__all__ = ["forward"]
