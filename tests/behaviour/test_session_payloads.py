"""What web apps keep in sessions (issue 11), on every server of the matrix: the payload
profiles round-trip on every layout, a Django login stays inline once the namespace has
its dictionary, anonymous sessions and login, and concurrent writers keep their changes."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest
import redis
import redis.asyncio

from densekv.codec import CONTENT_ID_MIN
from densekv.dictionaries import dictionary_key
from densekv.sessions import LAYOUTS, AsyncSessionStore, SessionStore, payload_flows
from densekv.sessions.layouts.partitioned import PartitionedLayout
from densekv.sessions.model import digest_of
from densekv.sessions.payload_flows import REFIT_FIRST, REFIT_SAMPLES
from densekv.tools.lab.session_profiles import PROFILES, session, sessions
from densekv.tools.server.process import ServerProcess
from tests.behaviour.monitored import continuations


def present_layouts(client: redis.Redis) -> list[str]:
    import densekv

    caps = densekv.probe(client)
    return [name for name in LAYOUTS if name != "fieldttl" or caps.field_ttl != "none"]


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_round_trips_on_every_layout(client: redis.Redis, profile: str) -> None:
    for layout in present_layouts(client):
        store = SessionStore(client, namespace=f"p{layout}", layout=layout, expected_sessions=100).open()
        made = [(store.create(ident, data), ident, data) for ident, data in sessions(profile, 20)]
        for token, ident, data in made:
            got = store.get(token)
            assert got is not None and got.identity == ident and got.data == data, layout


def test_a_django_login_stays_inline_once_the_namespace_has_a_dictionary(client: redis.Redis) -> None:
    store = SessionStore(client, layout="dense", expected_sessions=10_000, auto_train=None).open()
    store.train_dictionary(d for _, d in sessions("P1", 2000, start=100_000))
    tokens = [store.create(ident, data) for ident, data in sessions("P1", 2000)]
    assert not list(client.scan_iter(match=b"sess:so:*", count=1000))  # no out-of-line key
    layout = store._core.layout
    assert isinstance(layout, PartitionedLayout)
    for p in range(layout.partitions):
        assert client.object("encoding", layout.hash_key(p)) in (b"listpack", None)
    assert store.get(tokens[7]).data == session("P1", 7)[1]  # type: ignore[union-attr]


def test_a_store_trains_the_dictionary_itself_and_other_processes_adopt_it(client: redis.Redis) -> None:
    writer = SessionStore(client, layout="dense", expected_sessions=10_000, auto_train=300).open()
    assert writer.explain()["dictionary"] is None
    early = [writer.create(i, d) for i, d in sessions("P2", 300)]
    trained = writer.explain()["dictionary"]
    assert trained is not None and trained >= CONTENT_ID_MIN  # named by its content
    late = writer.create(*session("P2", 5000))
    reader = SessionStore(client, layout="dense", expected_sessions=10_000).open()  # a new process
    assert reader.explain()["dictionary"] == trained
    assert reader.get(early[0]).data == session("P2", 0)[1]  # type: ignore[union-attr]
    assert reader.get(late).data == session("P2", 5000)[1]  # type: ignore[union-attr]
    # sessions written before and after the dictionary are read by any store alike
    fresh = SessionStore(client, layout="dense", expected_sessions=10_000).open()
    fresh._core.payloads.codec.known.clear()
    assert fresh.get(late).data == session("P2", 5000)[1]  # type: ignore[union-attr]


def test_train_dictionary_samples_the_store_itself(client: redis.Redis) -> None:
    store = SessionStore(client, layout="dense", expected_sessions=5000, auto_train=None).open()
    tokens = [store.create(i, d) for i, d in sessions("P3", 1500)]
    trained = store.train_dictionary()
    assert trained == store.explain()["dictionary"] and trained >= CONTENT_ID_MIN
    again = store.create(*session("P3", 9999))
    assert store.get(again).data == session("P3", 9999)[1]  # type: ignore[union-attr]
    assert store.get(tokens[3]).data == session("P3", 3)[1]  # type: ignore[union-attr]


@pytest.mark.parametrize("partitions", [16, 256], ids=["cont-bit", "cont-suffix"])
def test_train_dictionary_samples_a_store_of_split_sessions(client: redis.Redis, partitions: int) -> None:
    """Sampled from the store, a split session is its record and its continuation field
    (top bit set, or the field and a 0 byte where the partition bits fill whole bytes): the
    continuation is read with its record, never taken for one (it was: DecodeError)."""
    store = SessionStore(client, layout="dense", partitions=partitions, auto_train=None).open()
    store.train_dictionary([d for _, d in sessions("P2", 300, start=5000)])  # P2 sessions split with it
    tokens = [store.create(i, d) for i, d in sessions("P2", 400)]
    assert store.stats()["split_sessions"] >= 300
    first = store.explain()["dictionary"]
    trained = store.train_dictionary()  # from the stored sessions
    assert trained == store.explain()["dictionary"] and trained != first
    for n in (0, 7, 399):
        assert store.get(tokens[n]).data == session("P2", n)[1]  # type: ignore[union-attr]
        store.apply(tokens[n], {"n": n})
        assert store.get(tokens[n]).data == {**session("P2", n)[1], "n": n}  # type: ignore[union-attr]


def test_anonymous_sessions_have_no_index_entry_and_log_in_atomically(client: redis.Redis) -> None:
    store = SessionStore(client, layout="dense", expected_sessions=100).open()
    anon = store.create(None, {"csrf_token": "ab" * 20})
    got = store.get(anon)
    assert got is not None and got.identity is None
    assert not list(client.scan_iter(match=b"sess:si:*"))
    token = store.login(anon, 42)
    assert token and token != anon and store.get(anon) is None
    got = store.get(token)
    assert got is not None and got.identity == 42 and got.data == {"csrf_token": "ab" * 20}
    assert [s.id for s in store.sessions_of(42)] == [got.id]
    # a second login (another user on the same browser) moves the index entry too
    token2 = store.login(token, "bob")
    assert token2 and store.sessions_of(42) == [] and len(store.sessions_of("bob")) == 1
    assert store.destroy_all("bob") == 1 and store.get(token2) is None
    assert store.login(token2, 1) is None  # gone: nothing is created


def test_concurrent_writers_of_different_keys_both_keep_their_change(client: redis.Redis, server: ServerProcess) -> None:
    store = SessionStore(client, layout="dense", expected_sessions=100).open()
    token = store.create(1, {"start": 0, "pad": "x." * 40})  # out of line: both paths race
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            own = SessionStore(server.client(), layout="dense", expected_sessions=100).open()
            for i in range(60):
                assert own.apply(token, {f"{name}{i}": i}) is not None
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    data = store.get(token).data  # type: ignore[union-attr]
    assert data is not None and all(data[f"{n}{i}"] == i for n in "ab" for i in range(60))


def test_a_destroyed_session_is_never_resurrected_by_a_later_write(client: redis.Redis) -> None:
    store = SessionStore(client, layout="dense", expected_sessions=100).open()
    token = store.create(1, {"a": 1, "big": "q." * 100})
    assert store.destroy(token)
    assert store.apply(token, {"b": 2}) is None and store.update(token, {"c": 3}) is False
    assert store.get(token) is None and not list(client.scan_iter(match=b"sess:so:*"))


def test_moved_in_sessions_keep_their_cookie_value(client: redis.Redis) -> None:
    store = SessionStore(client, layout="dense", expected_sessions=100).open()
    django_key = "k2x9ab7qv0m1n8c3d4e5f6g7h8i9j0l1"  # Django's 32 chars of [a-z0-9]
    assert store.create(None, {"_auth_user_id": "5"}, ttl=600, token=django_key) == django_key
    got = store.get(django_key)
    assert got is not None and got.data == {"_auth_user_id": "5"}
    with pytest.raises(ValueError, match="token"):
        store.create(None, {}, token="not a token!")


def test_due_for_touch_asks_for_a_write_only_once_a_quarter_of_the_window_passed(client: redis.Redis) -> None:
    now = [1_800_000_000.0]
    store = SessionStore(client, layout="dense", ttl=86_400, idle_ttl=3600, expected_sessions=100,
                         clock=lambda: now[0]).open()
    token = store.create(1, {"a": 1})
    s = store.get(token)
    assert s is not None and not store.due_for_touch(s)
    now[0] += 600
    assert not store.due_for_touch(store.get(token))  # type: ignore[arg-type]
    now[0] += 400  # 1000 s of 3600: more than a quarter
    s = store.get(token)
    assert s is not None and store.due_for_touch(s) and store.touch(token)
    assert store.get(token).expires_at == int(now[0]) + 3600  # type: ignore[union-attr]
    short = store.create(2, {"a": 1}, ttl=4000)  # near its hard end, rolling never passes it
    now[0] += 1000
    s = store.get(short)
    assert s is not None and store.due_for_touch(s) and store.touch(short)
    s = store.get(short)
    assert s is not None and s.expires_at == s.absolute_at
    assert not store.due_for_touch(s)  # nothing left to roll


def test_the_async_twin_has_the_web_operations(server: ServerProcess) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        await client.flushall()
        store = AsyncSessionStore(client, layout="dense", expected_sessions=100, auto_train=50)
        anon = await store.create(None, session("P2", 1)[1])
        assert (await store.apply(anon, {"x": 1}, ["_fresh"])) is not None
        token = await store.login(anon, 7)
        assert token is not None and (await store.get(anon)) is None
        got = await store.get(token)
        want = {k: v for k, v in session("P2", 1)[1].items() if k != "_fresh"} | {"x": 1}
        assert got is not None and got.identity == 7 and got.data == want
        assert not store.due_for_touch(got)
        await store.create_many([None] * 60, session("P0", 3)[1], batch=25)
        assert (await store.explain())["dictionary"] is not None
        assert await store.destroy_all(7) == 1
        await client.aclose()

    asyncio.run(main())


def test_an_async_store_trains_and_looks_at_its_dictionary_off_the_event_loop(
        server: ServerProcess, client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first dictionary's training and the look at its fit (tens of milliseconds of
    CPU, 100 on shop-like sessions) run in a worker thread under the asyncio store
    (flows.Compute), so a web worker's event loop serves other requests meanwhile; the sync
    store runs them in its caller's thread, as before."""
    seen: dict[str, set[int]] = {"train": set(), "fit": set()}
    real_train, real_fit = payload_flows.train_payloads, payload_flows.Payloads.fit

    def train(*args: Any) -> bytes:
        seen["train"].add(threading.get_ident())
        return real_train(*args)

    def fit(self: payload_flows.Payloads, *args: Any) -> Any:
        seen["fit"].add(threading.get_ident())
        return real_fit(self, *args)

    monkeypatch.setattr(payload_flows, "train_payloads", train)
    monkeypatch.setattr(payload_flows.Payloads, "fit", fit)

    async def main() -> int:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        store = AsyncSessionStore(aclient, namespace="aio", layout="dense", expected_sessions=10_000,
                                  auto_train=200)
        await store.create_many([None] * 200, session("P1", 1)[1], batch=100)  # trains on the 200th
        assert (await store.explain())["dictionary"] is not None
        tokens = await store.create_many([None] * REFIT_FIRST, session("P1", 2)[1], batch=500)  # looks
        assert (await store.get(tokens[-1])).data == session("P1", 2)[1]  # type: ignore[union-attr]
        await aclient.aclose()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert seen["train"] and seen["fit"] and loop_thread not in seen["train"] | seen["fit"]
    seen["train"].clear(), seen["fit"].clear()
    store = SessionStore(client, namespace="sync", layout="dense", expected_sessions=10_000, auto_train=200)
    store.create_many([None] * 200, session("P1", 1)[1], batch=100)
    store.create_many([None] * REFIT_FIRST, session("P1", 2)[1], batch=500)
    assert seen == {"train": {threading.get_ident()}, "fit": {threading.get_ident()}}


def test_the_sync_and_async_stores_expose_the_same_operations() -> None:
    public = lambda cls: {n for n in dir(cls) if not n.startswith("_")}
    assert public(SessionStore) - {"client"} == public(AsyncSessionStore) - {"client", "ready"}


def test_out_of_line_keys_share_the_partition_slot_on_a_cluster(cluster_client: redis.RedisCluster) -> None:
    from redis.crc import key_slot

    store = SessionStore(cluster_client, layout="dense", expected_sessions=1000).open()
    for ident, data in sessions("P3", 30):
        token = store.create(ident, data)
        layout = store._core.layout
        assert isinstance(layout, PartitionedLayout)
        digest = digest_of(token)
        assert digest is not None
        assert key_slot(layout.ool_key(digest)) == key_slot(layout.hash_key(layout.locate(digest)[0]))
        new = store.login(token, 5)
        assert new and store.get(new).data == data  # type: ignore[union-attr]


@pytest.mark.parametrize("layout", ["dense", "zset"])
def test_stats_count_the_payloads_that_did_not_fit_inline(client: redis.Redis, server: ServerProcess,
                                                          layout: str) -> None:
    """stats() says how many sessions are split and how many out of line (what the
    planner's advice to raise hash-max-listpack-value is about), as the server holds them."""
    store = SessionStore(client, layout=layout, expected_sessions=100, auto_train=None).open()
    tokens = [store.create(i, {"b": os.urandom(n)}) for i, n in enumerate([4, 8, 70, 72, 74, 300, 900] * 3)]
    layout_ = store._core.layout
    assert isinstance(layout_, PartitionedLayout)
    split = continuations(client, "sess", layout_.bits)[0]
    outside = len(list(client.scan_iter(match=b"sess:so:*")))
    assert split > 0 and outside > 0  # the sizes above make both kinds
    assert not list(client.scan_iter(match=b"sess:sc:*"))  # 0.1's continuation hashes: none
    stats = store.stats()
    assert (stats["split_sessions"], stats["out_of_line_sessions"]) == (split, outside)
    assert stats["sessions"] == len(tokens)

    async def main() -> dict[str, Any]:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            return await AsyncSessionStore(aclient, layout=layout, expected_sessions=100).stats()
        finally:
            await aclient.aclose()

    astats = asyncio.run(main())
    assert (astats["split_sessions"], astats["out_of_line_sessions"]) == (split, outside)


#: a key a Django app starts keeping in its sessions after launch, with a few values: unseen
#: by the dictionary, its name and value go into each payload (the key table's ESC), and a
#: Django login no longer fits one value; a table that names it codes it in one byte
SCHEMES = ("dark", "light", "auto")


def scheme(n: int) -> dict[str, str]:
    return {"preferred_color_scheme": SCHEMES[n % 3]}


def test_a_dictionary_the_sessions_outgrew_is_trained_again_and_their_next_writes_fit_inline(
        client: redis.Redis) -> None:
    """Django logins, dictionary trained on them; then the app keeps one more key in each:
    with the old dictionary most no longer fit one value. The look REFIT_FIRST writes later
    trains another, every process adopts it, and the next write of each session puts it back
    in one value; what was written before reads throughout."""
    store = SessionStore(client, layout="dense", expected_sessions=10_000).open()
    first = store.train_dictionary(d for _, d in sessions("P1", 2000, start=100_000))
    count = REFIT_FIRST // 2
    tokens = [store.create(i, d) for i, d in sessions("P1", count)]
    assert store.stats()["split_sessions"] == 0
    other = SessionStore(client, layout="dense", expected_sessions=10_000).open()  # another process
    for n in range(count - 1):
        store.apply(tokens[n], scheme(n))
    split = store.stats()["split_sessions"]
    assert split > count // 2 and store.explain()["dictionary"] == first  # the look is one write away
    store.apply(tokens[count - 1], scheme(count - 1))  # the REFIT_FIRST-th write
    refit = store.explain()
    assert refit["dictionary"] not in (first, None) and refit["dictionary_refits"] == 1
    other._core.metadata.read_at = -1e9  # its next operation re-reads the metadata (within a minute)
    assert other.get(tokens[0]).data == {**session("P1", 0)[1], **scheme(0)}  # type: ignore[union-attr]
    assert other.explain()["dictionary"] == refit["dictionary"]
    for n in range(count):  # read with the dictionary each names, then written with the new one
        assert store.get(tokens[n]).data == {**session("P1", n)[1], **scheme(n)}  # type: ignore[union-attr]
        other.apply(tokens[n], scheme(n + 1))
    assert store.stats()["split_sessions"] <= count // 20  # was `split`, over half (35 of 1000 on valkey-9.1)
    assert client.hlen(dictionary_key(store.namespace)) == 2
    assert all(store.get(t).data == {**session("P1", n)[1], **scheme(n + 1)}  # type: ignore[union-attr]
               for n, t in enumerate(tokens))


def test_payloads_that_grew_are_looked_at_before_the_gap_ends(client: redis.Redis) -> None:
    """The first look at REFIT_FIRST writes finds nothing better and doubles the gap; the
    payloads then grow (Django logins gain a key): the next look comes REFIT_SAMPLES writes
    later, once the recent payloads are all of the new kind, not at the gap's end."""
    store = SessionStore(client, layout="dense", expected_sessions=10_000).open()
    first = store.train_dictionary(d for _, d in sessions("P1", 2000, start=100_000))
    tokens = [store.create(i, d) for i, d in sessions("P1", REFIT_FIRST)]
    payloads = store._core.payloads
    assert payloads.refits == 0 and payloads.refit_gap == 2 * REFIT_FIRST  # looked once, kept it
    last = {}
    for n in range(REFIT_SAMPLES + REFIT_SAMPLES // 4):  # fewer writes than the gap
        last[n % REFIT_FIRST] = scheme(n)
        store.apply(tokens[n % REFIT_FIRST], last[n % REFIT_FIRST])
    assert payloads.refits == 1 and store.explain()["dictionary"] != first
    assert all(store.get(t).data == {**session("P1", k)[1], **last[k]}  # type: ignore[union-attr]
               for k, t in enumerate(tokens))


def test_sessions_that_keep_their_shape_keep_their_dictionary(client: redis.Redis) -> None:
    """Two looks at the fit (after REFIT_FIRST and 2 * REFIT_FIRST more writes) on sessions of
    one shape: the dictionary trained again on them is no better, so none is stored."""
    store = SessionStore(client, layout="dense", expected_sessions=10_000, auto_train=500).open()
    store.create_many([None] * 500, {"csrf_token": "0" * 40}, None)  # the dictionary, trained on the 500th
    first = store.explain()["dictionary"]
    assert first is not None
    for n in range(3 * REFIT_FIRST):
        store.create(*session("P0", n))
    looked = store._core.payloads
    assert looked.refit_gap == 4 * REFIT_FIRST and looked.refits == 0  # looked twice, kept it
    assert store.explain()["dictionary"] == first and client.hlen(dictionary_key(store.namespace)) == 1
