"""Lua scripts, one per file beside this module; each file's header states its contract.

`script(name)` returns the Script (source + SHA1) for `NAME.lua`. Executors send it with
EVALSHA, load it ahead of a pipeline the first time a connection pool sees it, and reload
it once on NOSCRIPT (after SCRIPT FLUSH or a restart).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files


@dataclass(frozen=True)
class Script:
    name: str
    source: bytes
    sha: str


@cache
def script(name: str) -> Script:
    source = files(__package__).joinpath(f"{name}.lua").read_bytes()
    return Script(name, source, hashlib.sha1(source).hexdigest())
