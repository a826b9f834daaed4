"""The seed's key-per-session layouts, kept as honest baselines (seed 000).

  json    `{ns}:sj:{XX}<hex digest rest>` -> JSON {"i": identity, "x": absolute expiry,
          "d": data}, with the key's expiry (SET ... EXAT) as the session's expiry: the
          seed's JSON + SETEX baseline.
  packed  the same with a binary key and a msgpack map {"i", "x", "d"}: the seed's
          "binary packing" iteration.
  hash    a HASH per session (fields i, x, d) + EXPIREAT, written in one MULTI: the
          seed's "HASH per session" iteration.

Session data goes in as it is (JSON or msgpack of the dict): these are the baselines the
compact layouts are measured against, so they get no payload packing and no dictionary.

XX is the first digest byte in hex, inside braces: it is the cluster hash tag, so a token
can be regenerated atomically (RENAME within one slot) by picking the new token among the
1/256 that share the old one's tag. The server removes expired sessions itself.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import replace
from typing import Any

import msgpack

from densekv.errors import DecodeError
from densekv.keys import glob_escape
from densekv.keys import key as key_name
from densekv.lua import script
from densekv.plan import Command, Plan, ScriptCall, script_call
from densekv.sessions.layouts.base import Layout
from densekv.sessions.model import Identity, Record


class KeyPerSessionLayout(Layout):
    server_expires = True
    code = "s?"
    value_kind = "string"  # for key_rename.lua
    touch_kind = "json"  # for key_touch.lua
    needs_read = True  # plan_replace compares with what was read (the value is opaque)

    def key(self, digest: bytes) -> bytes:
        return f"{self.namespace}:{self.code}:{{{digest[0]:02x}}}".encode() + self.key_rest(digest[1:])

    def key_rest(self, rest: bytes) -> bytes:
        return rest.hex().encode()

    def group_of(self, digest: bytes) -> Hashable:
        return digest[0]  # the hash tag: equal first bytes, equal slots

    def count_match(self) -> bytes:
        """Every session key of this layout: the namespace escaped, then the layout's code."""
        return glob_escape(key_name(self.namespace, self.code) + b":") + b"*"

    # -- value codec ------------------------------------------------------------------
    def encode(self, rec: Record) -> bytes:
        return self.pack(self.document(rec))

    @staticmethod
    def document(rec: Record) -> dict[str, Any]:
        """The seed's session document: identity, (absolute) expiry, optional data."""
        doc: dict[str, Any] = {"x": rec.absolute_at, "i": rec.identity}  # x first: key_touch.lua
        if rec.data is not None:
            doc["d"] = rec.data
        return doc

    def decode_value(self, digest: bytes, raw: Any, expiretime: int) -> Record:
        doc = self.unpack(raw)
        return Record(digest, doc["i"], expiretime, int(doc["x"]), doc.get("d"))

    def pack(self, doc: dict[str, Any]) -> bytes:
        """The document's bytes in this layout's serialization."""
        raise NotImplementedError

    def unpack(self, raw: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _decode(self, digest: bytes, raw: Any, expiretime: Any) -> Record | None:
        if raw is None or raw == [] or int(expiretime) < 0:
            return None
        try:
            return replace(self.decode_value(digest, raw, int(expiretime)), raw=self.raw_of(raw))
        except (ValueError, KeyError, TypeError, msgpack.ExtraData, msgpack.FormatError,
                UnicodeDecodeError) as exc:
            raise DecodeError(
                f"session {digest.hex()} ({self.key(digest)!r}) does not decode: {exc}", key=digest
            ) from exc

    def _read(self, key: bytes) -> Command:
        return Command(("GET", key), (key,))

    def raw_of(self, raw: Any) -> bytes:
        """What plan_replace compares: the whole value."""
        return bytes(raw)

    # -- operations ---------------------------------------------------------------------
    def plan_put(self, rec: Record, now: int) -> Plan[None]:
        key = self.key(rec.digest)
        return Plan((Command(("SET", key, self.encode(rec), "EXAT", rec.expires_at), (key,)),), lambda r: None)

    def put_guard(self, digest: bytes) -> tuple[tuple[bytes, ...], tuple[Any, ...]]:
        return (self.key(digest),), ("key", b"", b"")

    def plan_get(self, digest: bytes, outside: bool | str = True) -> Plan[Record | None]:
        key = self.key(digest)
        return Plan(
            (self._read(key), Command(("EXPIRETIME", key), (key,))),
            lambda r: self._decode(digest, r[0], r[1]),
            atomic=True,
        )

    def plan_touch(self, digest: bytes, now: int, idle_ttl: int) -> Plan[int]:
        key = self.key(digest)
        return script_call(script("key_touch"), (key,), (now, idle_ttl, self.touch_kind), int)

    def plan_replace(self, digest: bytes, current: Record | None, data: dict[str, Any] | None,
                     framed: bytes | None, now: int, times: tuple[int, int] | None = None) -> Plan[int]:
        """Compare-and-set on the whole value: 1 done, -2 changed or gone since `current`.
        With `times`, the value's absolute expiry and the key's EXAT change with it."""
        assert current is not None
        key = self.key(digest)
        if times is None:
            new = self.encode(replace(current, data=data))
            return script_call(script("kv_cas"), (key,), (current.raw, new), lambda r: 1 if int(r) else -2)
        new = self.encode(replace(current, data=data, expires_at=times[0], absolute_at=times[1]))
        return script_call(script("kv_cas"), (key,), (current.raw, new, times[0]), lambda r: 1 if int(r) else -2)

    def plan_delete(self, digest: bytes) -> Plan[Record | None]:
        key = self.key(digest)
        return Plan(
            (self._read(key), Command(("EXPIRETIME", key), (key,)), Command(("DEL", key), (key,))),
            lambda r: self._decode(digest, r[0], r[1]),
            atomic=True, revokes=True,
        )

    def plan_rename(self, old: bytes, new: bytes, now: int, identity: Any = ...,
                    current: Record | None = None) -> Plan[Any]:
        """Reply: the moved record, None if gone, or -2 (login only: changed since read)."""
        keys = (self.key(old), self.key(new))
        login = self.login_args(identity, current) if identity is not ... else ()
        args = (self.value_kind, now, *login, "", "")[:4]

        def decode(r: list[Any]) -> Any:
            if r[0] is None or r[0] == -2:
                return r[0]
            return self._decode(new, r[0][0], r[0][1])

        return Plan((ScriptCall(script("key_rename"), keys, args),), decode, revokes=True)

    def login_args(self, identity: Identity | None, current: Record | None) -> tuple[Any, ...]:
        assert current is not None
        return (current.raw, self.encode(replace(current, identity=identity)))


class JsonLayout(KeyPerSessionLayout):
    name = "json"
    code = "sj"
    touch_kind = "json"
    holds_bytes = False  # JSON has no bytes: such data is refused before the write

    def pack(self, doc: dict[str, Any]) -> bytes:
        return json.dumps(doc, separators=(",", ":")).encode()

    def unpack(self, raw: Any) -> dict[str, Any]:
        return json.loads(raw)  # type: ignore[no-any-return]


class PackedLayout(KeyPerSessionLayout):
    name = "packed"
    code = "sp"
    touch_kind = "msgpack"

    def key_rest(self, rest: bytes) -> bytes:
        return rest

    def pack(self, doc: dict[str, Any]) -> bytes:
        return msgpack.packb(doc, use_bin_type=True)  # type: ignore[no-any-return]

    def unpack(self, raw: Any) -> dict[str, Any]:
        return msgpack.unpackb(raw, raw=False)  # type: ignore[no-any-return]


class HashLayout(KeyPerSessionLayout):
    name = "hash"
    code = "sh"
    value_kind = "hash"
    touch_kind = "hash"

    def key_rest(self, rest: bytes) -> bytes:
        return rest

    def _read(self, key: bytes) -> Command:
        return Command(("HGETALL", key), (key,))

    def raw_of(self, raw: Any) -> bytes:
        """What plan_replace compares: the payload field (b"" when there is none)."""
        fields = dict(zip(raw[::2], raw[1::2])) if isinstance(raw, list) else raw
        return bytes(fields.get(b"d", b""))

    @staticmethod
    def ident_field(identity: Identity | None) -> Any:
        # str identities get an "s" prefix: a decimal int never starts with one; "-": none
        if identity is None:
            return b"-"
        return b"s" + identity.encode() if isinstance(identity, str) else identity

    def login_args(self, identity: Identity | None, current: Record | None) -> tuple[Any, ...]:
        return (self.ident_field(identity),)

    def plan_put(self, rec: Record, now: int) -> Plan[None]:
        key = self.key(rec.digest)
        ident = self.ident_field(rec.identity)
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
        ident: int | str | None
        if raw_ident == b"-":
            ident = None  # anonymous
        else:
            ident = raw_ident[1:].decode() if raw_ident[:1] == b"s" else int(raw_ident)
        data = msgpack.unpackb(fields[b"d"], raw=False) if b"d" in fields else None
        return Record(digest, ident, expiretime, int(fields[b"x"]), data)

    def plan_replace(self, digest: bytes, current: Record | None, data: dict[str, Any] | None,
                     framed: bytes | None, now: int, times: tuple[int, int] | None = None) -> Plan[int]:
        """Compare-and-set on the payload field "d" only (owner and expiry stay, unless
        `times` gives new ones)."""
        assert current is not None
        key = self.key(digest)
        payload = b"" if data is None else msgpack.packb(data, use_bin_type=True)
        check = ("is", current.raw) if current.raw else ("none", b"")
        return script_call(script("hkey_update"), (key,), (payload, now, *check, *(times or ())), int)
