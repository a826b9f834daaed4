"""Deprecated old path of densekv.tools.lab.cli: the lab's command; it moved into the tools'
tree (issue 33).

A name read from here is densekv.tools.lab.cli's own, with a DeprecationWarning that names
the new path, for one minor release (densekv/oldpaths.py; CHANGELOG.md lists every move).
"""

from densekv.oldpaths import forward

#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("LabInterrupted",)

__all__: list[str] = []
__getattr__ = forward(__name__, "densekv.tools.lab.cli", _MOVED)
