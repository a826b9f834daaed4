"""SessionCore's flows (densekv/sessions/core.py) against scripted replies, no server: one
row per case (operation, scripted round trips with the commands each must carry, result or
error), as h11 tests its state machine. The dense layout at 16 partitions with the
identity index; records as the server would hold them are packed with the format's own
pack_record (densekv/sessions/record.py), or taken from what a create sent.

What each row pins: the round trips (their number and order), the command or Lua script
of each step, its keys, and the ARGV that carry meaning (field, clock, the compare-and-set
value). Behaviour against real servers: tests/behaviour/test_sessions.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
import redis

from densekv.errors import (
    DecodeError,
    DensekvError,
    InvalidArgument,
    LifecycleMismatch,
    SessionDataInvalid,
    SessionDataTooLarge,
    SessionExists,
    SessionIdentityInvalid,
    WrongType,
)
from densekv.flows import MAX_CAS_TRIES, Flow
from densekv.keys import split_digest
from densekv.sessions.core import ServerFacts, SessionCore
from densekv.sessions.index import expiry_day
from densekv.sessions.layouts.base import LayoutLimits
from densekv.sessions.layouts.partitioned import cont_field
from densekv.sessions.model import Record, Session, digest_of
from densekv.sessions.record import pack_record
from tests.unit.scripted import ANY, Raises, Scripted, check, run

NOW = 1_800_000_000
FACTS = ServerFacts(LayoutLimits(128, 64, 128), "none", None, False)
META_REPLY = [b"layout", b"dense", b"partitions", b"16", b"base", b"16", b"index", b"1"]
IDENT = 42


def fresh(**kw: Any) -> SessionCore:
    """A core as a shell builds it (dense, 16 partitions, the index), not opened yet."""
    args: dict[str, Any] = {"namespace": "s", "layout": "dense", "ttl": 3600, "idle_ttl": None,
                            "expected_sessions": 1000, "index_identities": True, "partitions": 16,
                            "clock": lambda: NOW}
    return SessionCore(FACTS, **{**args, **kw})


def make(**kw: Any) -> SessionCore:
    """A core opened on a namespace whose metadata matches it."""
    core = fresh(**kw)
    index = b"1" if core.index is not None else b"0"
    run(core.open(), Scripted([[("store_meta", [*META_REPLY[:-1], index])]]))  # as both shells open it
    return core


CORE = make()
TOKEN = "T" * 32
D = digest_of(TOKEN)
assert D is not None
P, FIELD = split_digest(D, 4)  # 16 partitions: the digest's top 4 bits name the partition
HASH, CONT, OOL = b"s:sd:{%d}" % P, b"s:sc:{%d}" % P, b"s:so:{%d}:" % P + D
IX = CORE.index.key(CORE.index.partition_of(IDENT)) if CORE.index else b""
IX_FIELD = bytes([1, IDENT]) + D[:8]  # length + identity bytes + the first 8 digest bytes
BIG = {"note": "hello world, " * 8}  # framed past hash-max-listpack-value 64: split
HUGE = {"note": "hello world, " * 20}  # past record + one more value: out of line


def framed(data: dict[str, Any]) -> bytes:
    out = CORE.payloads.codec.encode(data)[1]
    assert out is not None
    return out


def raw(data: dict[str, Any] | None = None, expires: int = NOW + 100, identity: Any = IDENT) -> bytes:
    """A record as the dense layout stores it inline."""
    rec = Record(D, identity, expires, expires)
    return pack_record(rec, None if data is None else framed(data))


RAW, RAW2 = raw({"a": 1}), raw({"a": 1, "c": 3})


def stored(data: dict[str, Any]) -> dict[bytes, bytes]:
    """What a create of TOKEN with `data` writes: key -> value (its HSETs and SET)."""
    ex = Scripted(answer=lambda s: 1)
    run(CORE.put_records([CORE.new_record(None, data, None, TOKEN)]), ex)
    return {s.args[0]: s.args[2] if s.name == "HSET" else s.args[1] for s in ex.trips[0] if s.name in ("HSET", "SET")}


SPLIT, OUT = stored(BIG), stored(HUGE)
assert SPLIT[HASH][-len(framed(BIG)) :] != framed(BIG) and CONT in SPLIT and OOL in OUT  # as the rows assume


def session(data: dict[str, Any] | None, identity: Any = IDENT, expires: int = NOW + 100) -> Session:
    return Session(TOKEN, identity, expires, data, D.hex(), expires)


def hget(reply: Any) -> list[tuple[Any, Any]]:
    return [(("HGET", HASH, FIELD), reply)]


def update(expected_raw: bytes, data: dict[str, Any], reply: int) -> list[tuple[Any, Any]]:
    """hrec_update: KEYS hash, out-of-line key, continuation; ARGV field, now, the new
    framed payload, the value limit, mode, and the record as read (compare-and-set)."""
    return [(("hrec_update", (HASH, OOL, CONT), FIELD, NOW, framed(data), 64, "plain", expected_raw, b""), reply)]


DELETE = [("HGET", HASH, FIELD), ("HDEL", HASH, FIELD), ("HDEL", CONT, FIELD), ("DEL", OOL)]


def delete(reply: Any) -> list[tuple[Any, Any]]:
    return [(p, reply if p[0] == "HGET" else 1) for p in DELETE]


class Case(NamedTuple):
    id: str
    op: Callable[[SessionCore], Flow[Any]]
    script: list[list[tuple[Any, Any]]]
    expect: Any
    core: tuple[tuple[str, Any], ...] = ()  # SessionCore arguments of this row


CASES = [
    # get: one HGET; the record's expiry is checked against the core's clock
    Case("get-inline", lambda c: c.get(TOKEN), [hget(RAW)], session({"a": 1})),
    Case("get-no-data", lambda c: c.get(TOKEN), [hget(raw(None, identity=None))], session(None, None)),
    Case("get-missing", lambda c: c.get(TOKEN), [hget(None)], None),
    Case("get-expired-now", lambda c: c.get(TOKEN), [hget(raw({"a": 1}, expires=NOW))], None),
    Case("get-malformed-token", lambda c: c.get("short"), [], None),
    Case("get-split", lambda c: c.get(TOKEN),  # the rest is read again with the record, in one MULTI
         [hget(SPLIT[HASH]), [(("HGET", HASH, FIELD), SPLIT[HASH]), (("HGET", CONT, FIELD), SPLIT[CONT])]],
         session(BIG, None, NOW + 3600)),
    Case("get-out-of-line", lambda c: c.get(TOKEN), [hget(OUT[HASH]), [(("GET", OOL), OUT[OOL])]],
         session(HUGE, None, NOW + 3600)),
    Case("get-out-of-line-gone", lambda c: c.get(TOKEN),  # moved between reads: read whole, then give up
         [hget(OUT[HASH]), [(("GET", OOL), None)],
          [(("HMGET", HASH, FIELD), [OUT[HASH], None]), (("HGET", CONT), None), (("GET", OOL), None)],
          [(("HMGET", HASH, FIELD), [OUT[HASH], None]), (("HGET", CONT), None), (("GET", OOL), None)]],
         Raises(DecodeError, "out-of-line payload that is not stored")),
    Case("get-undecodable", lambda c: c.get(TOKEN), [hget(pack_record(Record(D, 1, NOW + 9, NOW + 9), b"\x01\xc1"))],
         Raises(DecodeError)),
    Case("get-undecodable-none", lambda c: c.get(TOKEN, "none"),
         [hget(pack_record(Record(D, 1, NOW + 9, NOW + 9), b"\x01\xc1"))], None),
    Case("get-wrong-type", lambda c: c.get(TOKEN), [hget(redis.ResponseError("WRONGTYPE Operation against a key"))],
         Raises(WrongType, "s:sd:")),
    Case("get-bad-undecodable-arg", lambda c: c.get(TOKEN, "ignore"), [], Raises(InvalidArgument)),
    # touch: without idle_ttl it is a get; with one, hrec_touch rolls the expiry on the server
    Case("touch-no-idle", lambda c: c.touch(TOKEN), [hget(RAW)], True),
    Case("touch-no-idle-missing", lambda c: c.touch(TOKEN), [hget(None)], False),
    Case("touch-idle", lambda c: c.touch(TOKEN), [[(("hrec_touch", (HASH,), FIELD, NOW, 600, "plain"), NOW + 600)]],
         True, (("idle_ttl", 600),)),
    Case("touch-idle-gone", lambda c: c.touch(TOKEN), [[("hrec_touch", 0)]], False, (("idle_ttl", 600),)),
    Case("touch-malformed-token", lambda c: c.touch("no"), [], False),
    # apply: a read, then a compare-and-set against the record as read
    Case("apply", lambda c: c.apply(TOKEN, {"b": 2}, ["a"]), [hget(RAW), update(RAW, {"b": 2}, 1)], {"b": 2}),
    Case("apply-lost-cas-retries", lambda c: c.apply(TOKEN, {"b": 2}),
         [hget(RAW), update(RAW, {"a": 1, "b": 2}, -2), hget(RAW2), update(RAW2, {"a": 1, "c": 3, "b": 2}, 1)],
         {"a": 1, "b": 2, "c": 3}),
    Case("apply-gone", lambda c: c.apply(TOKEN, {"b": 2}), [hget(None)], None),
    Case("apply-expired-meanwhile", lambda c: c.apply(TOKEN, {"b": 2}), [hget(RAW), update(RAW, {"a": 1, "b": 2}, 0)],
         None),
    Case("apply-not-a-dict", lambda c: c.apply(TOKEN, [("b", 2)]), [], Raises(SessionDataInvalid)),  # type: ignore[arg-type]
    Case("apply-too-large", lambda c: c.apply(TOKEN, {"b": "x y" * 40}), [hget(RAW)],  # read, then refused: no write
         Raises(SessionDataTooLarge), (("max_data_bytes", 64),)),
    Case("apply-bad-ttl", lambda c: c.apply(TOKEN, {}, ttl=0), [], Raises(InvalidArgument)),
    # destroy: the record and its parts in one MULTI (revokes), then the identity index
    Case("destroy", lambda c: c.destroy(TOKEN), [delete(RAW), [(("HDEL", IX, IX_FIELD), 1)]], True),
    Case("destroy-missing", lambda c: c.destroy(TOKEN), [delete(None)], False),
    Case("destroy-expired", lambda c: c.destroy(TOKEN), [delete(raw({}, expires=NOW - 1)), [("HDEL", 1)]], False),
    Case("destroy-no-index", lambda c: c.destroy(TOKEN), [delete(RAW)], True, (("index_identities", False),)),
    Case("destroy-id", lambda c: c.destroy_id(D.hex()), [delete(RAW), [("HDEL", 1)]], True),
    Case("destroy-id-not-hex", lambda c: c.destroy_id("zz" * 16), [], False),
    Case("destroy-id-short", lambda c: c.destroy_id("ab" * 15), [], False),
    # the store's metadata
    Case("open-adopts", lambda c: fresh().open(),  # the lifecycle record goes in the same call
         [[(("store_meta", (b"s:meta",), "open", "dense", 16, 1, "devices=0 limit=none stream=none"), META_REPLY)]],
         None),
    Case("open-other-lifecycle", lambda c: fresh().open(),
         [[("store_meta", [*META_REPLY, b"life", b"devices=0 limit=3 on_limit=refuse stream=none"])]],
         Raises(LifecycleMismatch, "max_sessions_per_identity=3, on_limit='refuse'")),
    Case("open-same-lifecycle", lambda c: fresh().open(),
         [[("store_meta", [*META_REPLY, b"life", b"devices=0 limit=none stream=none"])]], None),
    Case("open-other-layout", lambda c: fresh().open(),
         [[("store_meta", [b"layout", b"zset", b"partitions", b"16", b"base", b"16", b"index", b"1"])]],
         Raises(DensekvError, "holds a 'zset' session store")),
    Case("open-other-partitions", lambda c: fresh().open(),
         [[("store_meta", [b"layout", b"dense", b"partitions", b"32", b"base", b"32", b"index", b"1"])]],
         Raises(DensekvError, "holds 32 partitions")),
    Case("open-other-index", lambda c: fresh().open(),
         [[("store_meta", [b"layout", b"dense", b"partitions", b"16", b"base", b"16", b"index", b"0"])]],
         Raises(DensekvError, "index_identities=False")),
    Case("open-foreign-meta", lambda c: fresh().open(), [[("store_meta", [b"layout", b"mine"])]], Raises(DecodeError)),
    Case("refresh-unchanged", lambda c: c.refresh(), [[(("store_meta", (b"s:meta",), "read"), META_REPLY)]], False),
    Case("refresh-repartition-began", lambda c: c.refresh(),
         [[("store_meta", [b"layout", b"dense", b"partitions", b"32", b"base", b"16", b"from", b"16", b"index", b"1"])]],
         True),
    Case("refresh-adopts-lifecycle", lambda c: c.refresh(),  # another process changed it: no refusal
         [[("store_meta", [*META_REPLY, b"life", b"devices=1 limit=2 on_limit=evict stream=9"])]], True),
    Case("change-lifecycle", lambda c: c.change_lifecycle({"track_devices": True, "events_stream": ...}),
         [[(("store_meta", (b"s:meta",), "life", "", "devices=1 limit=none stream=none"),
            [*META_REPLY, b"life", b"devices=1 limit=none stream=none"])]], ANY),
    Case("change-lifecycle-checked-first", lambda c: c.change_lifecycle({"on_limit": "later"}), [],
         Raises(InvalidArgument, "on_limit")),
    Case("refresh-lost-meta-recovers", lambda c: c.refresh(),  # written again as this store would make it
         [[(("store_meta", (b"s:meta",), "read"), [])], [(("store_meta", (b"s:meta",), "open", "dense", 16, 1), [])]],
         False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_session_flows(case: Case) -> None:
    check(case.op(make(**dict(case.core))), case.script, case.expect)


def test_apply_with_read_writes_in_one_round_trip() -> None:
    core = make()
    got = run(core.get(TOKEN), Scripted([hget(RAW)]))
    check(core.apply(TOKEN, {"b": 2}, read=got), [update(RAW, {"a": 1, "b": 2}, 1)], {"a": 1, "b": 2})
    # changed since it was read: the compare-and-set fails, then it reads and merges again
    check(core.apply(TOKEN, {"b": 2}, read=got),
          [update(RAW, {"a": 1, "b": 2}, -2), hget(RAW2), update(RAW2, {"a": 1, "c": 3, "b": 2}, 1)],
          {"a": 1, "b": 2, "c": 3})
    # a read session that has expired since is not trusted: read first
    old = run(core.get(TOKEN), Scripted([hget(raw({"a": 1}, expires=NOW + 1))]))
    later = make(clock=lambda: NOW + 1)
    check(later.apply(TOKEN, {"b": 2}, read=old), [hget(None)], None)


def test_apply_gives_up_after_max_cas_tries_with_pauses_between() -> None:
    lost = [trip for _ in range(MAX_CAS_TRIES) for trip in (hget(RAW), [("hrec_update", -2)])]
    run_ = check(make().apply(TOKEN, {"b": 2}), lost, Raises(DensekvError, "kept changing"))
    assert len(run_.ex.sleeps) == MAX_CAS_TRIES - 2  # none before the first retry
    assert all(0 <= s <= 0.02 for s in run_.ex.sleeps)


def test_create_lists_the_identity_first_then_writes_the_record_and_checks_the_metadata() -> None:
    core = make()
    ex = Scripted([[(("HSET", IX), 1)], [("HSET", 1), (("EXISTS", b"s:meta"), 1)]])
    token = run(core.create(IDENT, {"a": 1}, None), ex)
    ex.done()
    d = digest_of(token)
    assert d is not None
    p, field = split_digest(d, 4)
    ix = ex.trips[0][0]
    assert ix.line == ("HSET", IX, bytes([1, IDENT]) + d[:8], expiry_day(NOW + 3600))
    put = ex.trips[1][0]
    assert put.line[:3] == ("HSET", b"s:sd:{%d}" % p, field)
    assert put.args[2] == pack_record(Record(d, IDENT, NOW + 3600, NOW + 3600), framed({"a": 1}))


def test_create_of_an_anonymous_session_sends_one_round_trip() -> None:
    ex = Scripted([[("HSET", 1), ("EXISTS", 1)]])
    run(make().create(None, None, None), ex)
    ex.done()


@pytest.mark.parametrize(("args", "error"), [
    ((1.5, None, None), SessionIdentityInvalid),
    ((None, None, 0), InvalidArgument),
    ((None, None, 2**32), InvalidArgument),
    ((None, {"t": (1, 2)}, None), SessionDataInvalid),
    ((None, {"b": "x y" * 40}, None), SessionDataTooLarge),
], ids=["float-identity", "ttl-0", "ttl-past-2106", "tuple-value", "over-max-data-bytes"])
def test_create_refuses_before_sending_anything(args: tuple[Any, ...], error: type[Exception]) -> None:
    core = make(max_data_bytes=64)
    check(core.create(*args), [], Raises(error))
    assert core.payloads.refused_too_large == (error is SessionDataTooLarge)


def test_create_many_empty_and_a_batch() -> None:
    core = make()
    check(core.create_many([], None, None), [], [])
    ex = Scripted([[("HSET", 1), ("HSET", 1)], [("HSET", 1)] * 3 + [("EXISTS", 1)]])
    tokens = run(core.create_many([1, 2, None], {"a": 1}, None), ex)
    ex.done()
    assert len(set(tokens)) == 3


def test_create_on_a_server_that_lost_the_metadata_writes_it_again() -> None:
    check(make().create(None, None, None),
          [[("HSET", 1), (("EXISTS", b"s:meta"), 0)], [(("store_meta", (b"s:meta",), "open", "dense", 16, 1), META_REPLY)]])


def test_create_with_a_given_token_is_one_check_and_put_script() -> None:
    put_new = ("put_new", (HASH, CONT, OOL), "field", FIELD, cont_field(FIELD, 4), NOW)
    check(make().create(None, None, None, TOKEN), [[(put_new, 1), ("EXISTS", 1)]], TOKEN)
    check(make().create(None, None, None, TOKEN), [[(put_new, 0), ("EXISTS", 1)]], Raises(SessionExists))


def test_a_get_speculates_on_the_rest_only_while_recent_reads_needed_it() -> None:
    core = make()
    core.payloads.split_rate = 0.5  # recent reads found split payloads: the continuation comes with the record
    check(core.get(TOKEN), [[(("HGET", HASH, FIELD), SPLIT[HASH]), (("HGET", CONT, FIELD), SPLIT[CONT])]],
          session(BIG, None, NOW + 3600))


def _scan_ix(refs: list[bytes]) -> list[tuple[Any, Any]]:
    return [(("HSCAN", IX, 0, "MATCH"), [b"0", [f for r in refs for f in (bytes([1, IDENT]) + r, b"1")]])]


def _find(found: list[tuple[bytes, bytes]]) -> list[tuple[Any, Any]]:
    return [(("HSCAN", HASH, 0, "MATCH"), [b"0", [x for pair in found for x in pair]])]


def test_destroy_all_deletes_what_the_index_finds_until_two_quiet_rounds() -> None:
    script = [
        _scan_ix([D[:8]]), _find([(FIELD, RAW)]),  # round 1: found, deleted, unlisted
        delete(RAW), [(("HDEL", IX, IX_FIELD), 1)],
        _scan_ix([]), _scan_ix([]),  # two rounds that agree nothing is left
    ]
    check(make().destroy_all(IDENT), script, 1)


def test_destroy_all_skips_a_stray_match_and_an_expired_session() -> None:
    other = pack_record(Record(D, 7, NOW + 100, NOW + 100), None)  # another identity's record
    check(make().destroy_all(IDENT), [_scan_ix([D[:8]]), _find([(FIELD, other)]),
                                      _scan_ix([D[:8]]), _find([(FIELD, raw({}, expires=NOW))])], 0)


def test_destroy_all_needs_the_index() -> None:
    check(make(index_identities=False).destroy_all(IDENT), [], Raises(DensekvError, "index_identities=False"))


def test_guarded_rereads_stale_metadata_first_and_gives_up_on_a_wrongtype_it_cannot_explain() -> None:
    ticks = [0.0]
    core = make(ticks=lambda: ticks[0])  # the monotonic clock the metadata's age is read from
    ticks[0] = 3600.0  # an hour since the metadata was read: stale
    check(core.guarded(lambda c: c.get(TOKEN)), [[(("store_meta", (b"s:meta",), "read"), META_REPLY)], hget(RAW)],
          session({"a": 1}))
    assert core.metadata.read_at == 3600.0  # read again now: fresh for the next call
    wrong = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    check(core.guarded(lambda c: c.get(TOKEN)), [hget(wrong), [("store_meta", META_REPLY)]], Raises(WrongType))


def test_guarded_retries_on_the_new_partition_count_after_a_repartition_tombstone() -> None:
    core = make()
    core.metadata.read_at = float("inf")
    wrong = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    grown = [b"layout", b"dense", b"partitions", b"32", b"base", b"16", b"from", b"16", b"index", b"1"]
    p32, field32 = split_digest(D, 5)
    key32 = b"s:sd:{%d}:5.%d" % (P, p32)  # a child partition keeps its root's hash tag

    def children(code: bytes) -> list[bytes]:
        return [b"s:%s:{%d}:5.%d" % (code, P, 2 * P + j) for j in (0, 1)]
    run_ = check(core.guarded(lambda c: c.get(TOKEN)),
                 [hget(wrong), [("store_meta", grown)],
                  [(("hrec_split", (HASH, b"s:sz:{%d}" % P, *children(b"sd"), CONT, *children(b"sc")), 1, 4, 0, 5),
                    1), (("HGET", key32, field32), None)]], None)
    assert run_.ex.trips[-1][0].lua and core.layout.describe()["partitions"] == 32


def test_regenerate_lists_the_new_digest_renames_in_one_script_then_unlists_the_old() -> None:
    read = [(("HMGET", HASH, FIELD), [RAW, None]), (("HGET", CONT, FIELD), None), (("GET", OOL), None)]
    rename = ("hrec_rename", (HASH, ANY, OOL, ANY, CONT, ANY), FIELD, ANY, NOW, "plain", b"")
    run_ = check(make().regenerate(TOKEN), [read, [(("HSET", IX), 1)], [(rename, RAW)], [(("HDEL", IX, IX_FIELD), 1)]])
    new = digest_of(run_.result)
    assert new is not None and new != D
    p, field = split_digest(new, 4)
    listed, (moved,) = run_.ex.trips[1][0], run_.ex.trips[2]
    assert listed.args == (IX, bytes([1, IDENT]) + new[:8], expiry_day(NOW + 100))
    assert moved.keys[1] == b"s:sd:{%d}" % p and moved.args[1] == field and moved.revokes


def test_regenerate_of_a_missing_session_writes_nothing() -> None:
    check(make().regenerate(TOKEN), [[("HMGET", [None, None]), ("HGET", None), ("GET", None)]], None)
    check(make(index_identities=False).regenerate(TOKEN), [[(("hrec_rename", (HASH, ANY, OOL, ANY, CONT, ANY), FIELD), None)]], None)
    check(make().regenerate("bad token"), [], None)


def make_here() -> SessionCore:
    """A core opened on a store made by 0.2 (its metadata says cont=here)."""
    core = fresh()
    run(core.open(), Scripted([[("store_meta", [*META_REPLY, b"cont", b"here"])]]))
    return core


def test_a_split_session_of_a_0_2_store_is_one_hmget() -> None:
    """A 0.2 store writes a split payload's rest as the continuation field beside the
    record (one HSET of both); a get that finds it split reads both with one HMGET, and
    once split reads are common (OUTSIDE_SPECULATE) every get is that one HMGET, an inline
    record among them read by the same command."""
    core = make_here()
    cfield = cont_field(FIELD, 4)  # 16 partitions: the field's top 4 bits are 0; the top one set
    ex = Scripted(answer=lambda s: 1)
    run(core.put_records([core.new_record(None, BIG, None, TOKEN)]), ex)
    (put,) = [s for s in ex.trips[0] if s.name == "HSET"]
    assert put.args[0] == HASH and put.args[1] == FIELD and put.args[3] == cfield
    rec, rest = put.args[2], put.args[4]
    both = [(("HMGET", HASH, FIELD, cfield), [rec, rest])]
    check(core.get(TOKEN), [hget(rec), both], session(BIG, None, NOW + 3600))
    core.payloads.split_rate = 1.0
    check(core.get(TOKEN), [both], session(BIG, None, NOW + 3600))
    check(core.get(TOKEN), [[(("HMGET", HASH, FIELD, cfield), [RAW, None])]], session({"a": 1}))
    # a record of 0.1's format in that store is completed from the continuation hash
    old = SPLIT[HASH]
    check(core.get(TOKEN), [[(("HMGET", HASH, FIELD, cfield), [old, None])],
                            [(("HGET", HASH, FIELD), old), (("HGET", CONT, FIELD), SPLIT[CONT])]],
          session(BIG, None, NOW + 3600))


def test_a_refresh_that_adopts_other_lifecycle_options_rebuilds_what_holds_them() -> None:
    core = make()
    assert not core.lines.on and core.recorder.outbox is None and core.sweeper.stream is None
    run(core.refresh(), Scripted([[("store_meta", [*META_REPLY, b"life", b"devices=1 limit=2 on_limit=refuse stream=9"])]]))
    assert (core.lines.track_devices, core.lines.limit, core.lines.on_limit) == (True, 2, "refuse")
    assert core.identities.lines is core.lines and core.rotations.lines is core.lines
    assert core.recorder.stream == 9 and core.recorder.outbox is not None and core.sweeper.stream == 9
    assert core.metadata.life.text() == "devices=1 limit=2 on_limit=refuse stream=9"
    run(core.refresh(), Scripted([[("store_meta", [*META_REPLY, b"life", b"devices=0 limit=none stream=none"])]]))
    assert not core.lines.on and core.recorder.outbox is None and core.sweeper.stream is None
