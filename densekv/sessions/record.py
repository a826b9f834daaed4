"""The compact binary session record used by the partitioned layouts (dense, zset, fieldttl).

    byte 0     flags: bits 0-3 identity length (0-14; 15 = a length byte follows),
                      bit 4 identity is a str (else an unsigned big-endian int),
                      bit 5 an absolute expiry follows (idle TTL in use),
                      bit 6 a msgpack payload ends the record
    bytes 1-4  expires_at, u32 big-endian unix seconds (good until 2106)
    [4 bytes]  absolute_at, u32, when bit 5
    [1 byte]   identity length, when bits 0-3 are 15
    identity   1-8 bytes (int) or the UTF-8 bytes (str)
    payload    msgpack of the data dict, to the end
So a session with a 4-byte integer identity and no payload costs 9 bytes of value.

Lua scripts read bytes 1-4 (and 5-8) directly (see lua/hrec_*.lua): keep this layout in
step with them. The numbers are format constants: a retired meaning is never reused.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack

from densekv.errors import DecodeError
from densekv.sessions.model import Identity, Record

F_LEN_MASK = 0x0F
F_LEN_ESCAPE = 0x0F
F_STR = 0x10
F_ABSOLUTE = 0x20
F_DATA = 0x40
_KNOWN = F_LEN_MASK | F_STR | F_ABSOLUTE | F_DATA


def pack_record(rec: Record) -> bytes:
    flags = 0
    if isinstance(rec.identity, str):
        ident = rec.identity.encode()
        flags |= F_STR
    else:
        ident = rec.identity.to_bytes(max(1, (rec.identity.bit_length() + 7) // 8), "big")
    parts = [b"", struct.pack(">I", rec.expires_at)]
    if rec.absolute_at != rec.expires_at:
        flags |= F_ABSOLUTE
        parts.append(struct.pack(">I", rec.absolute_at))
    if len(ident) < F_LEN_ESCAPE:
        flags |= len(ident)
    else:
        flags |= F_LEN_ESCAPE
        parts.append(bytes([len(ident)]))
    parts.append(ident)
    if rec.data is not None:
        flags |= F_DATA
        parts.append(msgpack.packb(rec.data, use_bin_type=True))
    parts[0] = bytes([flags])
    return b"".join(parts)


def unpack_record(digest: bytes, raw: bytes, *, where: str = "") -> Record:
    try:
        flags = raw[0]
        if flags & ~_KNOWN & 0xFF:
            raise ValueError(f"unknown flags {flags:#x}")
        (expires_at,) = struct.unpack_from(">I", raw, 1)
        pos = 5
        absolute_at = expires_at
        if flags & F_ABSOLUTE:
            (absolute_at,) = struct.unpack_from(">I", raw, pos)
            pos += 4
        length = flags & F_LEN_MASK
        if length == F_LEN_ESCAPE:
            length = raw[pos]
            pos += 1
        ident_raw = raw[pos : pos + length]
        if len(ident_raw) != length:
            raise ValueError("truncated identity")
        pos += length
        identity: Identity = ident_raw.decode() if flags & F_STR else int.from_bytes(ident_raw, "big")
        data: Any = None
        if flags & F_DATA:
            data = msgpack.unpackb(raw[pos:], raw=False)
            if not isinstance(data, dict):
                raise ValueError("payload is not a map")
        elif pos != len(raw):
            raise ValueError("trailing bytes")
    except (IndexError, ValueError, struct.error, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError, UnicodeDecodeError) as exc:
        raise DecodeError(
            f"session {digest.hex()}{where} holds a record that does not decode: {exc}",
            key=digest,
        ) from exc
    return Record(digest, identity, expires_at, absolute_at, data)
