"""Deprecated old path: the capability probe is `densekv.capabilities` now (issue 33: a
runtime module, out of the tools' server fixtures). `from densekv.server.probe import
probe` still works for one minor release, with a DeprecationWarning (densekv/oldpaths.py);
`densekv.probe` and `densekv.Capabilities` are the public names."""

from densekv.oldpaths import forward

__all__: list[str] = []
__getattr__ = forward(__name__, "densekv.capabilities")
