"""The compact binary session record used by the partitioned layouts (dense, zset, fieldttl).

    byte 0     flags: bits 0-3 identity length (0-14; 15 = a length byte follows),
                      bit 4 identity is a str (else an unsigned big-endian int),
                      bit 5 an absolute expiry follows (idle TTL in use),
                      bit 6 a plain msgpack payload ends the record (format 1: still read,
                            no longer written),
                      bit 7 a framed payload ends the record (densekv/sessions/payload.py:
                            packed msgpack, zstd with the namespace's dictionary where that
                            is smaller, or the one-byte out-of-line marker 0x0F)
    bytes 1-4  expires_at, u32 big-endian unix seconds (good until 2106)
    [4 bytes]  absolute_at, u32, when bit 5
    [1 byte]   identity length, when bits 0-3 are 15
    identity   1-8 bytes (int) or the UTF-8 bytes (str); none at all (length 0, bit 4
               clear) for an anonymous session
    payload    to the end
So a session with a 4-byte integer identity and no payload costs 9 bytes of value; an
anonymous one with a CSRF token (40 hex chars) 1 + 4 + 26 = 31.

Lua scripts read bytes 1-4 (and 5-8) directly (see lua/hrec_*.lua): keep this layout in
step with them. The numbers are format constants: a retired meaning is never reused.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack

from densekv.errors import DecodeError
from densekv.sessions.model import Identity, Record
from densekv.sessions.payload import CONTINUED, CONTINUED_HERE, MARKER

F_LEN_MASK = 0x0F
F_LEN_ESCAPE = 0x0F
F_STR = 0x10
F_ABSOLUTE = 0x20
F_DATA = 0x40  # format 1, read only
F_FRAMED = 0x80
_KNOWN = F_LEN_MASK | F_STR | F_ABSOLUTE | F_DATA | F_FRAMED
_HEAD = struct.Struct(">BI")  # flags, expires_at
_U32 = struct.Struct(">I")


def identity_section(identity: Identity | None) -> tuple[int, bytes]:
    """(flag bits 0-4, the bytes after the expiries) that store `identity`."""
    if identity is None:
        return 0, b""
    if isinstance(identity, str):
        ident, flags = identity.encode(), F_STR
    else:
        ident, flags = identity.to_bytes(max(1, (identity.bit_length() + 7) // 8), "big"), 0
    if len(ident) < F_LEN_ESCAPE:
        return flags | len(ident), ident
    return flags | F_LEN_ESCAPE, bytes([len(ident)]) + ident


def pack_record(rec: Record, payload: bytes | None = None) -> bytes:
    """The record; `payload` is the framed payload (or the out-of-line marker), if any."""
    flags, ident = identity_section(rec.identity)
    parts = [b"", struct.pack(">I", rec.expires_at)]
    if rec.absolute_at != rec.expires_at:
        flags |= F_ABSOLUTE
        parts.append(struct.pack(">I", rec.absolute_at))
    parts.append(ident)
    if payload is not None:
        flags |= F_FRAMED
        parts.append(payload)
    parts[0] = bytes([flags])
    return b"".join(parts)


def unpack_record(digest: bytes, raw: bytes, *, where: str = "", key: bytes | None = None) -> Record:
    """The record `raw` holds (DecodeError if it does not decode; its message names `where`,
    or the hash `key` it was read from: formatted only then, not on every read)."""
    try:
        flags, expires_at = _HEAD.unpack_from(raw)
        if flags & ~_KNOWN & 0xFF:
            raise ValueError(f"unknown flags {flags:#x}")
        pos = 5
        absolute_at = expires_at
        if flags & F_ABSOLUTE:
            (absolute_at,) = _U32.unpack_from(raw, pos)
            pos += 4
        length = flags & F_LEN_MASK
        if length == F_LEN_ESCAPE:
            length = raw[pos]
            pos += 1
        end = pos + length
        identity: Identity | None
        if not length:
            identity = "" if flags & F_STR else None
        elif end > len(raw):
            raise ValueError("truncated identity")
        elif flags & F_STR:
            identity = raw[pos:end].decode()
        else:
            identity = int.from_bytes(raw[pos:end], "big")
        pos = end
        data: Any = None
        payload = None
        if flags & F_DATA and flags & F_FRAMED:
            raise ValueError("both payload flags set")
        if flags & F_FRAMED:
            payload = raw[pos:] if type(raw) is bytes else bytes(raw[pos:])
            if not payload:
                raise ValueError("empty payload")
        elif flags & F_DATA:
            data = msgpack.unpackb(raw[pos:], raw=False)
            if not isinstance(data, dict):
                raise ValueError("payload is not a map")
        elif pos != len(raw):
            raise ValueError("trailing bytes")
    except (IndexError, ValueError, struct.error, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError, UnicodeDecodeError) as exc:
        if key is not None:
            where = f" in {key.decode()}"
        raise DecodeError(
            f"session {digest.hex()}{where} holds a record that does not decode: {exc}",
            key=digest,
        ) from exc
    part = None
    outside = here = False
    if payload is not None and payload[0] in _OUTSIDE_HEADS:
        if payload[0] == _CONTINUED_HERE:
            part = payload[1:]
            outside = here = True
        elif payload[0] == _CONTINUED:
            part = payload[1:]
            outside = True
        elif len(payload) == 1:  # the out-of-line marker
            outside = True
    # Record(...) without the frozen dataclass's __init__ (1.0 us against 0.4: every read
    # makes one); the same fields, so the same record
    new = object.__new__(Record)
    new.__dict__.update(digest=digest, identity=identity, expires_at=expires_at, absolute_at=absolute_at,
                        data=data, payload=None if outside else payload, outside=outside,
                        raw=raw if type(raw) is bytes else bytes(raw), ool=None, part=part, here=here)
    return new


_CONTINUED = CONTINUED[0]
_CONTINUED_HERE = CONTINUED_HERE[0]
_OUTSIDE_HEADS = frozenset((CONTINUED[0], CONTINUED_HERE[0], MARKER[0]))


def _with(rec: Record, changes: dict[str, Any]) -> Record:
    """`rec` with `changes` to its own fields: a copy of its __dict__, without the frozen
    dataclass's field walk and __init__ (dataclasses.replace costs 3.9 us, this 0.6)."""
    new = object.__new__(Record)
    fields = new.__dict__
    fields.update(rec.__dict__)
    fields.update(changes)
    return new


def with_data(rec: Record, data: dict[str, Any] | None) -> Record:
    """`rec` with its payload decoded into `data` (a get's largest copy)."""
    return _with(rec, {"data": data})


def with_rest(rec: Record, rest: bytes | None) -> Record:
    """A record whose payload is not all inline, completed with what was read for it
    (`ool` keeps that value: apply compares it). None: the rest was not there."""
    if rest is None:
        return rec
    return _with(rec, {"payload": rec.part + rest if rec.part is not None else rest, "ool": rest})


def replaced(rec: Record, **changes: Any) -> Record:
    """dataclasses.replace(rec, **changes) at with_data's cost, for Record's own fields only."""
    unknown = changes.keys() - rec.__dict__.keys()
    if unknown:
        raise TypeError(f"Record has no field {min(unknown)!r}")
    return _with(rec, changes)


__all__ = [
    "identity_section", "pack_record", "replaced", "unpack_record", "with_data", "with_rest"
]
