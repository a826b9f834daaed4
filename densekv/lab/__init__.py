"""Deprecated old path of densekv.tools.lab: the lab; it moved into the tools' tree (issue 33).

A name read from here is densekv.tools.lab's own, with a DeprecationWarning that names the
new path, for one minor release (densekv/oldpaths.py; CHANGELOG.md lists every move).
"""

from densekv.oldpaths import forward

__all__: list[str] = []
__getattr__ = forward(__name__, "densekv.tools.lab")
