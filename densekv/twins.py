"""Sync classes and their asyncio twins document each operation once.

Every sync class has an async twin with the same operations (tests/unit/test_twins.py);
the docstring is written on the sync method, and `share_docstrings` gives it to the twin's
method that has none, so `help()` and the API reference show it on both.
"""

from __future__ import annotations

from typing import Any

__all__ = ["share_docstrings"]


def share_docstrings(sync: type[Any], twin: type[Any]) -> None:
    """Give each public method of `twin` without a docstring the docstring of `sync`'s."""
    for name, member in vars(twin).items():
        if name.startswith("_") or not callable(member) or member.__doc__:
            continue
        doc = getattr(getattr(sync, name, None), "__doc__", None)
        if doc:
            member.__doc__ = doc
