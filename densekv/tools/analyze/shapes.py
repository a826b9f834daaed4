"""What a value is: its shape, and the session data inside it when it holds a session (pure).

Shapes of a string value, tried in this order (the first that fits wins):
    empty, integer (canonical decimal text, as listpacks store it), uuid (36-character
    text), hex (even-length hex text), json-dict / json (JSON text), msgpack-dict (a
    msgpack map with string keys and nothing after it), pickle-dict / pickle (pickle
    protocol 2+), compressed (zlib, gzip, zstd, lz4 frame magic), text (printable UTF-8),
    binary.
Session formats (the producers densekv moves sessions in from):
    flask-session  a msgpack or JSON dict under `session:` (Flask-Session 0.8 default)
    django         a pickled dict under `...django.contrib.sessions.cache...` (Django's
                   cache session backend through django-redis or Django's RedisCache)
    starsessions   a JSON dict with starsessions' `__metadata__`, or under `starsessions.`
    dict           any other small JSON/msgpack/pickled dict (a session if it has a TTL)
Pickles are read without running code: the unpickler refuses every class and global
(`find_class`), so only plain dicts, lists, str, bytes, numbers, bools and None load; a
pickle of anything else is shape "pickle" and is never decoded.

Sets and hashes: the member (or field) lengths, whether they are all one size, and what
they look like (uuid text, hex text, integers, 16-byte binary, text); for hashes whether
every value is the same short constant (a set kept as a hash, seed 002).
"""

from __future__ import annotations

import io
import json
import pickle
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from densekv.codec import is_canonical_int

MAX_DECODE = 64 * 1024  # larger values are not decoded (shape from the first bytes only)
SMALL_VALUE = 8  # strings this short are remembered (flags: "1", "", "true")

_UUID = re.compile(rb"\A[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
_HEX = re.compile(rb"\A(?:[0-9a-f]{2})+\Z|\A(?:[0-9A-F]{2})+\Z")
_MAGIC = (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"\x04\x22\x4d\x18")


@dataclass(frozen=True)
class Shape:
    """One value, described."""

    kind: str  # see the module docstring; for other types: "hash", "set", "zset", "list", ...
    length: int  # string bytes; members / fields / elements for the other types
    session: str | None = None  # flask-session | django | starsessions | dict
    member_size: int | None = None  # the one length of every member (field), if they share it
    member_kind: str | None = None  # uuid | hex | int | binary | text (sets, hash fields)
    small: bytes | None = None  # the value itself when it is at most SMALL_VALUE bytes
    flag_values: bool = False  # hash: every value is the same short constant


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError("a pickle with classes is not read")


def safe_unpickle(raw: bytes) -> Any:
    """Plain data from a pickle, or raise (never runs code: no class, no global)."""
    return _NoGlobals(io.BytesIO(raw)).load()


def _str_keys(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) for k in value)


def decode_dict(raw: bytes) -> tuple[str, dict[str, Any]] | None:
    """(format, dict) for a JSON / msgpack / plain-pickle dict with string keys, else None."""
    if not raw or len(raw) > MAX_DECODE:
        return None
    first = raw[:1]
    if first == b"{":
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if _str_keys(value):
            return "json", value
    if raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        try:
            value = safe_unpickle(raw)
        except Exception:  # noqa: BLE001 - any failure means "not plain data"
            return None
        return ("pickle", value) if _str_keys(value) else None
    if 0x80 <= raw[0] <= 0x8F or raw[0] in (0xDE, 0xDF):  # msgpack fixmap / map16 / map32
        try:
            value = msgpack.unpackb(raw, raw=False, strict_map_key=True)
        except Exception:  # noqa: BLE001 - ExtraData, bad UTF-8, ... : not msgpack
            return None
        if _str_keys(value):
            return "msgpack", value
    return None


def session_format(pattern: str, fmt: str, data: Mapping[str, Any]) -> str:
    if "__metadata__" in data or pattern.startswith("starsessions."):
        return "starsessions"
    if "django.contrib.sessions" in pattern and fmt == "pickle":
        return "django"
    if pattern.startswith("session:") and fmt in ("msgpack", "json"):
        return "flask-session"
    return "dict"


def string_shape(raw: bytes, pattern: str = "") -> Shape:
    """The shape of a string value (see the module docstring)."""
    n = len(raw)
    small = raw if n <= SMALL_VALUE else None
    if n == 0:
        return Shape("empty", 0, small=small)
    if is_canonical_int(raw):
        return Shape("integer", n, small=small)
    if _UUID.match(raw):
        return Shape("uuid", n)
    if n >= 8 and _HEX.match(raw):
        return Shape("hex", n)
    found = decode_dict(raw)
    if found is not None:
        fmt, data = found
        return Shape(f"{fmt}-dict", n, session=session_format(pattern, fmt, data))
    if raw[:1] in (b"{", b"[") and n <= MAX_DECODE:
        try:
            json.loads(raw)
            return Shape("json", n)
        except ValueError:
            pass
    if raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return Shape("pickle", n)
    if raw.startswith(_MAGIC):
        return Shape("compressed", n)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Shape("binary", n, small=small)
    return Shape("text" if text.isprintable() else "binary", n, small=small)


def member_kind(members: Sequence[bytes]) -> tuple[int | None, str | None]:
    """(the common length or None, what the members look like) for set members / fields."""
    if not members:
        return None, None
    sizes = {len(m) for m in members}
    size = sizes.pop() if len(sizes) == 1 else None
    if all(_UUID.match(m) for m in members):
        return size, "uuid"
    if all(is_canonical_int(m) for m in members):
        return size, "int"
    if all(len(m) >= 8 and _HEX.match(m) for m in members):
        return size, "hex"
    try:
        texts = [m.decode("utf-8") for m in members]
    except UnicodeDecodeError:
        return size, "binary"
    return size, "text" if all(t.isprintable() for t in texts) else "binary"


def collection_shape(kind: str, members: Sequence[bytes], count: int,
                     values: Sequence[bytes] | None = None) -> Shape:
    """Shape of a set / hash / zset / list from (a sample of) its members and its length."""
    size, what = member_kind(members)
    flags = bool(values) and len(set(values or ())) == 1 and len((values or [b""])[0]) <= SMALL_VALUE
    return Shape(kind, count, member_size=size, member_kind=what, flag_values=flags)


def hash_session(pattern: str, fields: Mapping[bytes, bytes]) -> dict[str, Any] | None:
    """A hash read as session data (field -> text or bytes), when every field is text."""
    out: dict[str, Any] = {}
    for k, v in fields.items():
        try:
            name = k.decode("utf-8")
        except UnicodeDecodeError:
            return None
        try:
            out[name] = v.decode("utf-8")
        except UnicodeDecodeError:
            out[name] = bytes(v)
    return out
