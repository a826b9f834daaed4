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
Entries are removed when their session is destroyed or swept; sweep also drops entries
whose expiry day has passed, so a failure between two steps cannot leak an entry for
more than a day past the session's absolute expiry. Readers never trust the index alone:
every session found through it is re-read and its identity checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from densekv.keys import glob_escape, partition_bits, tag
from densekv.lua import script
from densekv.plan import Plan, ScriptCall, command
from densekv.sessions.model import Identity, identity_bytes

DAY = 86_400
DAY0 = 20_400  # 2025-11-09: day numbers stay below 4096 (a 2-byte listpack int) until 2036


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

    def plan_remove(self, identity: Identity, digests: list[bytes]) -> Plan[int]:
        key = self.key(self.partition_of(identity))
        prefix = self.prefix(identity)
        fields = list(dict.fromkeys(prefix + d[: self.ref_len] for d in digests))
        return command("HDEL", key, *fields, keys=(key,), decode=int)

    def plan_scan(self, identity: Identity, cursor: int) -> Plan[tuple[int, list[bytes]]]:
        """One HSCAN step: (next cursor, session references). A listpack comes whole."""
        key = self.key(self.partition_of(identity))
        prefix = self.prefix(identity)
        pattern = glob_escape(prefix) + b"*"

        def decode(reply: Any) -> tuple[int, list[bytes]]:
            nxt, flat = reply
            refs = [f[len(prefix):] for f in flat[::2]
                    if f.startswith(prefix) and len(f) == len(prefix) + self.ref_len]
            return int(nxt), refs

        return command("HSCAN", key, cursor, "MATCH", pattern, "COUNT", 1000, keys=(key,), decode=decode)

    def units(self) -> Iterator[int]:
        return iter(range(self.partitions))

    def plan_sweep(self, partition: int, now: int) -> Plan[int]:
        """Drop the entries whose expiry day has begun (one partition, atomic)."""
        key = self.key(partition)
        return Plan((ScriptCall(script("ix_sweep"), (key,), (now, DAY, DAY0)),), lambda r: int(r[0]))
