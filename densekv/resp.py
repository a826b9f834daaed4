"""RESP encoding of raw command batches, for the tools that write or read many commands at
once (densekv/tools/bulk.py's loading, the analyzer's reads), sent by wire.send_packed.

Why it exists apart from wire.py: it uses nothing of redis-py's, only hiredis's packer
(`pack`), or the same bytes written here (`_resp`) where hiredis is missing:
*N CRLF, then $len CRLF arg CRLF for each argument; tests/unit/test_wire_adapter.py checks
that the two agree. Not loaded by `import densekv`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    import hiredis as _hiredis
except ImportError:  # pragma: no cover - redis[hiredis] is a requirement
    _hiredis = None  # type: ignore[assignment]

__all__ = ["arg_bytes", "pack"]


def pack(commands: Sequence[Sequence[Any]]) -> bytes:
    """The commands in RESP, one buffer: hiredis's packer (bytes, str, int and float
    arguments), or `_resp`, the same bytes, where hiredis is missing. Any other argument
    type raises TypeError."""
    if _hiredis is not None:
        pack_command = _hiredis.pack_command
        return b"".join([pack_command(c if type(c) is tuple else tuple(c)) for c in commands])
    return _resp(commands)


def arg_bytes(value: Any) -> bytes:
    """One command argument as the bytes RESP carries (what hiredis's packer writes)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()
    if isinstance(value, float):
        return repr(value).encode()
    raise TypeError(f"a command takes bytes, str, int or float arguments, not {type(value).__name__}")


def _resp(commands: Sequence[Sequence[Any]]) -> bytes:
    """RESP without hiredis: *N CRLF, then $len CRLF arg CRLF for each argument."""
    out: list[bytes] = []
    append = out.append
    for cmd in commands:
        append(b"*%d\r\n" % len(cmd))
        for value in cmd:
            data = arg_bytes(value)
            append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)
