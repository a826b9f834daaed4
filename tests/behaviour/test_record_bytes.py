"""benchmarks/record_bytes.py takes stored sessions apart by the record format: its parts must
add up to the bytes really stored, for inline, split and no-payload sessions, and the
counterfactual it reports must follow from them. Real server (the suite's), real store."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import redis

from densekv.sessions import SessionStore
from densekv.sessions.layouts.partitioned import cont_field, is_cont_field
from densekv.tools.lab.session_profiles import session

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def record_bytes() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # its own imports: gitstamp, records
    try:
        spec = importlib.util.spec_from_file_location("record_bytes", BENCH / "record_bytes.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.parametrize("partitions", [16, 256], ids=["cont-bit", "cont-suffix"])
def test_the_parts_add_up_to_the_stored_bytes(client: redis.Redis, partitions: int) -> None:
    rb = record_bytes()
    store = SessionStore(client, namespace="rb", layout="dense", partitions=partitions, ttl=86400,
                         idle_ttl=3600)
    bits = partitions.bit_length() - 1
    store.train_dictionary([session(p, i)[1] for p in ("P1", "P2") for i in range(200)])
    store.create_each([session("P1", i) for i in range(100)] + [session("P2", i) for i in range(100)]
                      + [(7, None), (None, {})], batch=100)
    kinds: dict[str, int] = {}
    for key in client.scan_iter(match=b"rb:sd:*"):
        entries = client.hgetall(key)
        for field, raw in entries.items():
            if is_cont_field(field, bits):
                continue
            cont = cont_field(field, bits)
            rest = entries.get(cont)
            kind, parts, codec = rb.taken_apart(field, raw, rest, cont)
            kinds[kind] = kinds.get(kind, 0) + 1
            value = sum(parts[p] for p in ("flags", "expiry", "absolute", "identity", "codec", "dict_ref", "body"))
            if kind == "split":
                assert rest is not None
                assert value + 1 == len(raw) + len(rest)  # the marker is the one byte more
                assert parts["split"] == 1 + len(cont)
            elif kind == "out_of_line":  # the marker ends the record; the payload is in its own key
                assert rest is None and value + 1 == len(raw) and raw[-1] == 0x0F
            else:
                assert rest is None and value == len(raw)
            assert parts["field"] == len(field) and parts["absolute"] == 4  # an idle ttl: absolute_at
            assert codec in (("table", "deflate", "zstd", "plain") if parts["body"] else ("",))
            assert codec or kind == "out_of_line" or not parts["codec"]
            assert parts["dict_ref"] in ((4,) if codec in ("table", "deflate", "zstd") else (0,))
    # every session taken apart once: P1 and the two without data inline, most of P2 split
    assert sum(kinds.values()) == 202 and kinds["inline"] >= 102 and kinds["split"] >= 50
