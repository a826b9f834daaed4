"""The identity index: which sessions belong to an identity ("log out everywhere").

Partitioned listpack hashes `{ns}:si:{Q}`, one field per session:
    field = len(identity) (1 byte) + identity bytes + session digest (16 bytes)
    value = the session's absolute expiry (u32 as a decimal: the listpack stores it as
            a 5-byte integer)
Q = the top bits of SHA-256(identity), so one identity's entries share a partition and
sessions_of() is one HSCAN MATCH <len+identity>* (the length byte makes the prefix exact).
Entries are removed when their session is destroyed or swept; sweep also drops entries
whose absolute expiry has passed, so a failure between two steps cannot leak an entry
forever. Readers never trust the index alone: sessions_of() re-reads every session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from densekv.keys import partition_bits, tag
from densekv.lua import script
from densekv.plan import Plan, ScriptCall, command
from densekv.sessions.model import Identity, identity_bytes

_GLOB_SPECIAL = frozenset(b"*?[]\\")


def _glob_escape(data: bytes) -> bytes:
    return b"".join(b"\\" + bytes([c]) if c in _GLOB_SPECIAL else bytes([c]) for c in data)


class IdentityIndex:
    def __init__(self, namespace: str, partitions: int) -> None:
        self.namespace = namespace
        self.partitions = partitions
        self.bits = partition_bits(partitions)

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
        return command("HSET", key, self.prefix(identity) + digest, absolute_at, keys=(key,),
                       decode=lambda r: None)

    def plan_remove(self, identity: Identity, digests: list[bytes]) -> Plan[int]:
        key = self.key(self.partition_of(identity))
        prefix = self.prefix(identity)
        return command("HDEL", key, *[prefix + d for d in digests], keys=(key,), decode=int)

    def plan_scan(self, identity: Identity, cursor: int) -> Plan[tuple[int, list[bytes]]]:
        """One HSCAN step: (next cursor, digests). A listpack partition comes whole."""
        key = self.key(self.partition_of(identity))
        prefix = self.prefix(identity)
        pattern = _glob_escape(prefix) + b"*"

        def decode(reply: Any) -> tuple[int, list[bytes]]:
            nxt, flat = reply
            digests = [f[len(prefix):] for f in flat[::2] if f.startswith(prefix) and len(f) == len(prefix) + 16]
            return int(nxt), digests

        return command("HSCAN", key, cursor, "MATCH", pattern, "COUNT", 1000, keys=(key,), decode=decode)

    def units(self) -> Iterator[int]:
        return iter(range(self.partitions))

    def plan_sweep(self, partition: int, now: int) -> Plan[int]:
        """Drop the entries whose absolute expiry has passed (one partition, atomic)."""
        key = self.key(partition)
        return Plan((ScriptCall(script("ix_sweep"), (key,), (now,)),), lambda r: int(r[0]))
