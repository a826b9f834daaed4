"""zstd dictionaries for maps: train from a sample, store in the server under an id, load.

A dictionary trained on a few hundred values of one schema lets zstd compress a 1 KB JSON
document to a fraction of what it can alone. The dictionary must outlive the process that
trained it, so it lives in the server: hash `{ns}:zd:{{ns}}`, field N = the bytes of
dictionary N. N is derived from the bytes (codec.content_id), so an id always means the
same bytes, in every process, after a restart that lost the hash too: a process that
still holds a dictionary can store it again under the same id, and one that trained
another after the loss gets another id. (Stores from before kept a counter in field
"next"; their values still read with the dictionary stored under their id.) A value
names its dictionary by id (codec.py): the map or store loads a dictionary the first
time a value needs it and caches it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from densekv.codec import Codec, ZstdDictionary, _zstd
from densekv.errors import InvalidArgument
from densekv.keys import tag
from densekv.lua import script
from densekv.plan import Plan, command, script_call


def dictionary_key(namespace: str) -> bytes:
    """The namespace's zstd dictionaries hash, `{ns}:zd:{<ns>}` (densekv/keys.py code zd)."""
    return tag(namespace, "zd", namespace)


def train_dictionary(samples: Iterable[Any], size: int = 16384, codec: Codec | None = None) -> bytes:
    """A zstd dictionary trained on sample values, serialized as the codec will see them
    (str/bytes as they are, anything else as msgpack). A few hundred samples is enough."""
    codec = codec or Codec()
    payloads = [codec.payload(v)[1] for v in samples]
    if len(payloads) < 8:
        raise InvalidArgument("train a dictionary on at least a few dozen sample values")
    zstd = _zstd()
    try:
        trained = zstd.train_dictionary(size, payloads)
    except zstd.ZstdError as exc:
        raise InvalidArgument(f"zstd could not train a dictionary from this sample ({exc}): give more samples") from exc
    return trained.as_bytes()  # type: ignore[no-any-return]


def plan_store(namespace: str, data: bytes) -> Plan[ZstdDictionary]:
    """Store a dictionary under its content id (again, if the server lost it: idempotent)."""
    key = dictionary_key(namespace)
    d = ZstdDictionary.of(data)
    return script_call(script("map_dict_store"), [key], [d.id, d.data], decode=lambda r: d)


def plan_stored(namespace: str, dictionary_id: int) -> Plan[bool]:
    """Whether the server still holds dictionary `dictionary_id`."""
    key = dictionary_key(namespace)
    return command("HEXISTS", key, str(dictionary_id), keys=(key,), decode=bool)


def plan_load(namespace: str, ids: Sequence[int]) -> Plan[dict[int, bytes]]:
    key = dictionary_key(namespace)

    def decode(reply: list[Any]) -> dict[int, bytes]:
        return {i: bytes(d) for i, d in zip(ids, reply) if d is not None}

    return command("HMGET", key, *[str(i) for i in ids], keys=(key,), decode=decode)


class DictionaryCache:
    """Dictionaries a map has loaded, by id (they never change once stored)."""

    def __init__(self) -> None:
        self.known: dict[int, bytes] = {}

    def missing(self, ids: Iterable[int | None]) -> list[int]:
        return sorted({i for i in ids if i is not None and i not in self.known})

    def add(self, found: dict[int, bytes]) -> None:
        self.known.update(found)


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["DictionaryCache", "dictionary_key", "plan_load", "plan_store", "plan_stored",
           "train_dictionary"]
