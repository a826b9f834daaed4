"""The seed's key-per-session layouts, kept as honest baselines (seed 000).

  json    `{ns}:sj:{XX}<hex digest rest>` -> JSON {"i": identity, "x": absolute expiry,
          "d": data}, with the key's expiry (SET ... EXAT) as the session's expiry: the
          seed's JSON + SETEX baseline.
  packed  the same with a binary key and a msgpack map {"i", "x", "d"}: the seed's
          "binary packing" iteration.
  hash    a HASH per session (fields i, x, d) + EXPIREAT, written in one MULTI: the
          seed's "HASH per session" iteration.

XX is the first digest byte in hex, inside braces: it is the cluster hash tag, so a token
can be regenerated atomically (RENAME within one slot) by picking the new token among the
1/256 that share the old one's tag. The server removes expired sessions itself.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Hashable
from typing import Any

import msgpack

from densekv.errors import DecodeError
from densekv.lua import script
from densekv.plan import Command, Plan, ScriptCall, script_call
from densekv.sessions.layouts.base import Layout
from densekv.sessions.model import Record

MAX_CAS_TRIES = 20


class KeyPerSessionLayout(Layout):
    server_expires = True
    code = "s?"
    value_kind = "string"  # for key_rename.lua
    touch_kind = "json"  # for key_touch.lua

    def key(self, digest: bytes) -> bytes:
        return f"{self.namespace}:{self.code}:{{{digest[0]:02x}}}".encode() + self.key_rest(digest[1:])

    def key_rest(self, rest: bytes) -> bytes:
        return rest.hex().encode()

    def group_of(self, digest: bytes) -> Hashable:
        return digest[0]  # the hash tag: equal first bytes, equal slots

    # -- value codec ------------------------------------------------------------------
    def encode(self, rec: Record) -> bytes:
        raise NotImplementedError

    @staticmethod
    def document(rec: Record) -> dict[str, Any]:
        """The seed's session document: identity, (absolute) expiry, optional data."""
        doc: dict[str, Any] = {"i": rec.identity, "x": rec.absolute_at}
        if rec.data is not None:
            doc["d"] = rec.data
        return doc

    def decode_value(self, digest: bytes, raw: Any, expiretime: int) -> Record:
        raise NotImplementedError

    def _decode(self, digest: bytes, raw: Any, expiretime: Any) -> Record | None:
        if raw is None or raw == [] or int(expiretime) < 0:
            return None
        try:
            return self.decode_value(digest, raw, int(expiretime))
        except (ValueError, KeyError, TypeError, msgpack.ExtraData, msgpack.FormatError,
                UnicodeDecodeError) as exc:
            raise DecodeError(
                f"session {digest.hex()} ({self.key(digest)!r}) does not decode: {exc}", key=digest
            ) from exc

    def _read(self, key: bytes) -> Command:
        return Command(("GET", key), (key,))

    # -- operations ---------------------------------------------------------------------
    def plan_put(self, rec: Record, now: int) -> Plan[None]:
        key = self.key(rec.digest)
        return Plan((Command(("SET", key, self.encode(rec), "EXAT", rec.expires_at), (key,)),), lambda r: None)

    def plan_get(self, digest: bytes) -> Plan[Record | None]:
        key = self.key(digest)
        return Plan(
            (self._read(key), Command(("EXPIRETIME", key), (key,))),
            lambda r: self._decode(digest, r[0], r[1]),
            atomic=True,
        )

    def plan_touch(self, digest: bytes, now: int, idle_ttl: int) -> Plan[int]:
        key = self.key(digest)
        return script_call(script("key_touch"), (key,), (now, idle_ttl, self.touch_kind), int)

    def plan_update(  # type: ignore[override]
        self, digest: bytes, data: dict[str, Any] | None, now: int
    ) -> Generator[list[Plan[Any]], list[Any], int]:
        """Read, re-encode, compare-and-set (the value is opaque to the server)."""
        key = self.key(digest)
        for _ in range(MAX_CAS_TRIES):
            raw, expiretime = (yield [Plan((self._read(key), Command(("EXPIRETIME", key), (key,))), atomic=True)])[0]
            rec = self._decode(digest, raw, expiretime)
            if rec is None or not rec.live(now):
                return 0
            new = self.encode(Record(digest, rec.identity, rec.expires_at, rec.absolute_at, data))
            done = (yield [script_call(script("kv_cas"), (key,), (raw, new), int)])[0]
            if done:
                return 1
        return 0

    def plan_delete(self, digest: bytes) -> Plan[Record | None]:
        key = self.key(digest)
        return Plan(
            (self._read(key), Command(("EXPIRETIME", key), (key,)), Command(("DEL", key), (key,))),
            lambda r: self._decode(digest, r[0], r[1]),
            atomic=True,
        )

    def plan_rename(self, old: bytes, new: bytes, now: int) -> Plan[Record | None]:
        keys = (self.key(old), self.key(new))
        return Plan(
            (ScriptCall(script("key_rename"), keys, (self.value_kind, now)),),
            lambda r: None if r[0] is None else self._decode(new, r[0][0], r[0][1]),
        )


class JsonLayout(KeyPerSessionLayout):
    name = "json"
    code = "sj"
    touch_kind = "json"

    def encode(self, rec: Record) -> bytes:
        return json.dumps(self.document(rec), separators=(",", ":")).encode()

    def decode_value(self, digest: bytes, raw: Any, expiretime: int) -> Record:
        doc = json.loads(raw)
        return Record(digest, doc["i"], expiretime, int(doc["x"]), doc.get("d"))


class PackedLayout(KeyPerSessionLayout):
    name = "packed"
    code = "sp"
    touch_kind = "msgpack"

    def key_rest(self, rest: bytes) -> bytes:
        return rest

    def encode(self, rec: Record) -> bytes:
        return msgpack.packb(self.document(rec), use_bin_type=True)  # type: ignore[no-any-return]

    def decode_value(self, digest: bytes, raw: Any, expiretime: int) -> Record:
        doc = msgpack.unpackb(raw, raw=False)
        return Record(digest, doc["i"], expiretime, int(doc["x"]), doc.get("d"))


class HashLayout(KeyPerSessionLayout):
    name = "hash"
    code = "sh"
    value_kind = "hash"
    touch_kind = "hash"

    def key_rest(self, rest: bytes) -> bytes:
        return rest

    def _read(self, key: bytes) -> Command:
        return Command(("HGETALL", key), (key,))

    def plan_put(self, rec: Record, now: int) -> Plan[None]:
        key = self.key(rec.digest)
        # str identities get an "s" prefix: a decimal int never starts with one
        ident = b"s" + rec.identity.encode() if isinstance(rec.identity, str) else rec.identity
        args: list[Any] = ["HSET", key, "i", ident, "x", rec.absolute_at]
        if rec.data is not None:
            args += ["d", msgpack.packb(rec.data, use_bin_type=True)]
        return Plan(
            (Command(tuple(args), (key,)), Command(("EXPIREAT", key, rec.expires_at), (key,))),
            lambda r: None,
            atomic=True,
        )

    def decode_value(self, digest: bytes, raw: Any, expiretime: int) -> Record:
        fields = dict(zip(raw[::2], raw[1::2])) if isinstance(raw, list) else raw
        raw_ident = fields[b"i"]
        ident: int | str = raw_ident[1:].decode() if raw_ident[:1] == b"s" else int(raw_ident)
        data = msgpack.unpackb(fields[b"d"], raw=False) if b"d" in fields else None
        return Record(digest, ident, expiretime, int(fields[b"x"]), data)

    def plan_update(  # type: ignore[override]
        self, digest: bytes, data: dict[str, Any] | None, now: int
    ) -> Plan[int]:
        key = self.key(digest)
        payload = b"" if data is None else msgpack.packb(data, use_bin_type=True)
        return script_call(script("hkey_update"), (key,), (payload, now), int)
