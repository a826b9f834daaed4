"""The identity index: which sessions belong to an identity ("log out everywhere").

Partitioned listpack hashes `{ns}:si:{Q}`, one field per session:
    field = len(identity) (1 byte) + identity bytes + a reference to the session
    value = the day of the session's absolute expiry, counted from DAY0 (a small integer:
            the listpack stores it in 2 bytes until 2036)
The reference is what the layout needs to find the session again (`Layout.index_ref`):
the whole 16-byte digest for one-key-per-session layouts, only its first 8 bytes for the
partitioned ones, which find the session with one HSCAN MATCH in the partition that those
bytes name (they hold the partition bits). Cost per session with a 3-byte integer identity
and an 8-byte reference: 12 + 2 bytes of field entry and 3 of value entry, about 17 bytes
(the full digest and a 5-byte timestamp took 28).
Q = the top bits of SHA-256(identity), so one identity's entries share a partition and
sessions_of() is one HSCAN MATCH <len+identity>* (the length byte makes the prefix exact).
A store that tracks devices or limits sessions per identity (SessionStore's track_devices,
max_sessions_per_identity) writes values of format 1 instead, read by lua/ix_admit.lua,
lua/ix_seen.lua and lua/ix_sweep.lua:
    byte 0      0xD1 (never an ASCII digit: a format-0 value is a day number in decimal)
    bytes 1-4   absolute_at, u32        bytes 5-8  expires_at as of the entry's last write
                                                   (login, set_ttl, a limited store's touch)
    bytes 9-12  created_at: when this device logged in (kept across regenerate)
    bytes 13-16 line: random, the same through one device's rotations (what a limit counts)
    bytes 17-   the device label the app gave at login, 0-32 bytes of UTF-8
17 bytes more than format 0 with no label (the listpack's 2-byte integer becomes a string
entry of 18): measured by benchmarks/session_devices.py. A store that tracks devices and
sets no limit writes format 2, the same without what only the limit reads (the expiry of
the last touch and the line; last seen is read off the record, as before):
    byte 0      0xD2        bytes 1-4  absolute_at, u32        bytes 5-8  created_at
    bytes 9-    the device label, 0-32 bytes of UTF-8
8 bytes less than format 1. Every format is read everywhere: a namespace whose options
change (change_lifecycle: every process of a namespace uses the options its metadata
records, meta.Lifecycle) keeps its entries, unmigrated, each in its format until its
session's next write of it (a rotation carries created_at and the label to the new format).
Entries are removed when their session is destroyed or swept; sweep also drops entries
whose expiry day has passed, so a failure between two steps cannot leak an entry for
more than a day past the session's absolute expiry. Readers never trust the index alone:
every session found through it is re-read and its identity checked.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from densekv.keys import glob_escape, partition_bits, tag
from densekv.lua import script
from densekv.plan import Plan, ScriptCall, command
from densekv.sessions.model import Identity, identity_bytes

DAY = 86_400
DAY0 = 20_400  # 2025-11-09: day numbers stay below 4096 (a 2-byte listpack int) until 2036


V1 = 0xD1
V2 = 0xD2
LABEL_MAX = 32  # bytes of UTF-8
_V1 = struct.Struct(">BIIII")  # format 1's fixed part: 0xD1, absolute, expires, created, line
_V2 = struct.Struct(">BII")  # format 2's: 0xD2, absolute, created
LIMIT_POLICIES = ("evict", "refuse")


@dataclass(frozen=True, slots=True)
class Entry:
    """A format-1 or format-2 index value, decoded (format 2 has no expires_at or line)."""

    absolute_at: int
    expires_at: int | None
    created_at: int
    line: int | None
    label: str | None


def pack_entry(absolute_at: int, expires_at: int, created_at: int, line: int, label: str | None) -> bytes:
    """A format-1 value (a store with a limit)."""
    return _V1.pack(V1, absolute_at, expires_at, created_at, line) + (label or "").encode()


def pack_device(absolute_at: int, created_at: int, label: str | None) -> bytes:
    """A format-2 value (a store that tracks devices and sets no limit)."""
    return _V2.pack(V2, absolute_at, created_at) + (label or "").encode()


def unpack_entry(value: bytes) -> Entry | None:
    """The format-1 or format-2 value `value` holds, or None for a format-0 day number."""
    if len(value) >= _V1.size and value[0] == V1:
        _, absolute, expires, created, line = _V1.unpack_from(value)
        return Entry(absolute, expires, created, line, value[_V1.size:].decode("utf-8", "replace") or None)
    if len(value) >= _V2.size and value[0] == V2:
        _, absolute, created = _V2.unpack_from(value)
        return Entry(absolute, None, created, None, value[_V2.size:].decode("utf-8", "replace") or None)
    return None


def expiry_day(absolute_at: int) -> int:
    """The index value: the first day number at whose start the session is surely dead."""
    return -(-absolute_at // DAY) - DAY0


class IdentityIndex:
    def __init__(self, namespace: str, partitions: int, ref_len: int = 16) -> None:
        self.namespace = namespace
        self.partitions = partitions
        self.bits = partition_bits(partitions)
        self.ref_len = ref_len

    def key(self, partition: int) -> bytes:
        return tag(self.namespace, "si", partition)

    def prefix(self, identity: Identity) -> bytes:
        ident = identity_bytes(identity)
        return bytes([len(ident)]) + ident

    def partition_of(self, identity: Identity) -> int:
        top = int.from_bytes(hashlib.sha256(identity_bytes(identity)).digest()[:4], "big")
        return top >> (32 - self.bits) if self.bits else 0

    def plan_add(self, identity: Identity, digest: bytes, absolute_at: int) -> Plan[None]:
        key = self.key(self.partition_of(identity))
        field = self.prefix(identity) + digest[: self.ref_len]
        return command("HSET", key, field, expiry_day(absolute_at), keys=(key,), decode=lambda r: None)

    @staticmethod
    def outlives(absolute_at: int, listed_at: int) -> bool:
        """Whether an entry listed for `listed_at` must be written again for a session that
        now lives to `absolute_at`: only when its day moves (a format-0 value is the day, so
        a later time within the same day would write the same bytes: one command saved on
        every write that renews a lifetime)."""
        return expiry_day(absolute_at) > expiry_day(listed_at)

    def plan_remove(self, identity: Identity, digests: list[bytes]) -> Plan[int]:
        key = self.key(self.partition_of(identity))
        prefix = self.prefix(identity)
        fields = list(dict.fromkeys(prefix + d[: self.ref_len] for d in digests))
        return command("HDEL", key, *fields, keys=(key,), decode=int)

    def plan_admit(self, identity: Identity, digest: bytes, value: bytes, source: bytes | None,
                   relabel: bool, now: int, limit: int, policy: str) -> Plan[list[bytes] | int]:
        """List a session with a format-1 value, at most `limit` live lines for the identity
        (lua/ix_admit.lua): the references of the sessions evicted to make room (least
        recently seen first), or 0 (refused, policy "refuse"), or -1 (`source`, the digest the
        session rotates from, is no longer listed: the session was evicted or ended)."""
        key = self.key(self.partition_of(identity))
        prefix = self.prefix(identity)
        src = prefix + source[: self.ref_len] if source is not None else b""

        def decode(reply: Any) -> list[bytes] | int:
            if reply[0] != 1:
                return int(reply[0])
            return [f[len(prefix):] for f in reply[1:]]

        return Plan((ScriptCall(script("ix_admit"), (key,), (
            glob_escape(prefix) + b"*", prefix + digest[: self.ref_len], value, src, b"1" if relabel else b"0",
            now, limit, policy)),), lambda r: decode(r[0]))

    def plan_seen(self, identity: Identity, digest: bytes, absolute_at: int, expires_at: int,
                  whole: bytes) -> Plan[None]:
        """New expiries in a format-1 entry (format 2: its absolute_at), the rest kept
        (`whole`: the value to write over a format-0 one); a missing entry is not written (its session ended since it was
        read; lua/ix_seen.lua)."""
        key = self.key(self.partition_of(identity))
        field = self.prefix(identity) + digest[: self.ref_len]
        return Plan((ScriptCall(script("ix_seen"), (key,), (field, struct.pack(">II", absolute_at, expires_at), whole)),),
                    _none)

    def plan_listed(self, identity: Identity, digest: bytes) -> Plan[bool]:
        key = self.key(self.partition_of(identity))
        return command("HEXISTS", key, self.prefix(identity) + digest[: self.ref_len], keys=(key,), decode=bool)

    def plan_scan(self, identity: Identity, cursor: int) -> Plan[tuple[int, list[tuple[bytes, bytes]]]]:
        """One HSCAN step: (next cursor, (session reference, value) pairs). A listpack
        comes whole."""
        key = self.key(self.partition_of(identity))
        prefix = self.prefix(identity)
        pattern = glob_escape(prefix) + b"*"

        def decode(reply: Any) -> tuple[int, list[tuple[bytes, bytes]]]:
            nxt, flat = reply
            refs = [(flat[i][len(prefix):], flat[i + 1]) for i in range(0, len(flat), 2)
                    if flat[i].startswith(prefix) and len(flat[i]) == len(prefix) + self.ref_len]
            return int(nxt), refs

        return command("HSCAN", key, cursor, "MATCH", pattern, "COUNT", 1000, keys=(key,), decode=decode)

    def units(self) -> Iterator[int]:
        return iter(range(self.partitions))

    def plan_sweep(self, partition: int, now: int) -> Plan[int]:
        """Drop the entries whose expiry day has begun (one partition, atomic)."""
        key = self.key(partition)
        return Plan((ScriptCall(script("ix_sweep"), (key,), (now, DAY, DAY0)),), lambda r: int(r[0]))


def _none(replies: list[Any]) -> None:
    return None
