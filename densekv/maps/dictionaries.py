"""Deprecated old path: the zstd dictionaries are `densekv.dictionaries` now (issue 33:
below both kinds that use them, maps and sessions). Importing a name from here still works
for one minor release, with a DeprecationWarning (densekv/oldpaths.py)."""

from densekv.oldpaths import forward

__all__: list[str] = []
__getattr__ = forward(__name__, "densekv.dictionaries")
