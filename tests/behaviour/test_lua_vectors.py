"""Fixed vectors for the scripts trimmed for speed (issue 22: densekv/lua/hrec_touch.lua and
map_incr.lua do their byte and number arithmetic in Lua 5.1's doubles): each run on the real
server against a model written here in Python, at the edges the arithmetic has (expiries up
to 2**32 - 1, the absolute-expiry cap, every identity form; counters across 2**53 and up to
the signed 64-bit limits)."""

from __future__ import annotations

import itertools

import pytest
import redis

from densekv.lua import script
from densekv.maps import CompactMap
from densekv.sessions.model import Record
from densekv.sessions.record import pack_record, unpack_record

DIGEST = bytes(range(16))
U32_MAX = 2**32 - 1
NOW = 1_800_000_000

#: (expires_at, absolute_at) pairs: live or not, capped or not, at the top of u32
TIMES = [(NOW + 10, NOW + 10), (NOW + 10, NOW + 500), (NOW + 10, U32_MAX), (U32_MAX - 5, U32_MAX),
         (NOW, NOW + 100), (NOW - 1, NOW + 100), (NOW + 300, NOW + 400), (U32_MAX, U32_MAX)]
IDENTITIES = [None, 7, 2**63, "ann", "x" * 20]
PAYLOADS = [None, b"\x01abc", b"\x0d" + b"p" * 30]
IDLES = [0, 60, 1000, U32_MAX - NOW]


def touch_model(rec: Record, now: int, idle: int) -> tuple[int, int]:
    """(reply, the expires_at stored after): hrec_touch.lua's contract."""
    if rec.expires_at <= now:
        return 0, rec.expires_at
    new = min(now + idle, rec.absolute_at)
    if new <= rec.expires_at:
        return rec.expires_at, rec.expires_at
    return new, new


def test_hrec_touch_matches_its_model(client: redis.Redis) -> None:
    touch = script("hrec_touch")
    sha = client.script_load(touch.source)
    checked = 0
    for (exp, absolute), identity, payload, idle in itertools.product(TIMES, IDENTITIES, PAYLOADS, IDLES):
        rec = Record(DIGEST, identity, exp, absolute)
        raw = pack_record(rec, payload)
        client.hset("part", b"f", raw)
        reply = client.evalsha(sha, 2, "part", "zs", b"f", NOW, idle, "plain")
        want_reply, want_exp = touch_model(rec, NOW, idle)
        stored = client.hget("part", b"f")
        assert stored is not None
        case = (exp, absolute, identity, payload, idle)
        assert reply == want_reply, case
        # only bytes 1-4 (expires_at) may change, to exactly the model's value
        assert stored == raw[:1] + want_exp.to_bytes(4, "big") + raw[5:], case
        assert unpack_record(DIGEST, stored).expires_at == want_exp
        checked += 1
    assert client.evalsha(sha, 2, "part", "zs", b"absent", NOW, 60, "plain") == 0
    assert checked == len(TIMES) * len(IDENTITIES) * len(PAYLOADS) * len(IDLES)


@pytest.mark.parametrize("start,deltas", [
    (2**53 - 3, [1, 1, 1, 1, 1]),            # across 2**53 (doubles stop being exact)
    (-(2**53) + 3, [-1, -1, -1, -1, -1]),
    (2**63 - 10, [3, 3, 3]),                 # up to the signed 64-bit top
    (-(2**63) + 10, [-3, -3, -3]),
    (0, [2**62, 2**62 - 1, -(2**62)]),
    (123, [-(2**53), 2**53, 1]),
])
def test_map_incr_matches_python_ints(client: redis.Redis, start: int, deltas: list[int]) -> None:
    m = CompactMap(client, "vec", expected=100)
    m.set("k", start)
    value = start
    for delta in deltas:
        value += delta
        assert m.incrby("k", delta) == value
        assert m.get("k") == value
