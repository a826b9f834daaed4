"""Moving in from an old backend (densekv/integrations/movein.py): the one policy every web
shell follows, run as a flow fed the results an old source and a store would give (pure: no
server is started), then the typed calls and the sync driver that run it."""

from __future__ import annotations

from typing import Any

import pytest

from densekv.errors import ServerUnavailable, SessionDataInvalid, SessionDataTooLarge, SessionExists
from densekv.integrations.calls import Create, ForgetOld, Get, ReadOld, StoreCall, StoreTtl
from densekv.integrations.drive import run
from densekv.integrations.movein import move_in
from densekv.sessions.model import Session

SOURCE: Any = object()  # the flow only names it in its calls
MOVED = Session(token="t", identity=None, expires_at=0, data={"a": 1})


def play(flow: Any, answers: list[Any]) -> tuple[list[StoreCall], Any]:
    """Feed `flow` `answers` in order (an exception is thrown in); its calls and result."""
    calls: list[StoreCall] = []
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as done:
            return calls, done.value
        calls.append(call)
        answer = answers.pop(0)
        result, error = (None, answer) if isinstance(answer, BaseException) else (answer, None)


def kinds(calls: list[StoreCall]) -> list[str]:
    return [c.name for c in calls]


def test_a_session_moves_in_under_its_token_then_the_old_copy_goes() -> None:
    calls, found = play(move_in(SOURCE, "t"), [({"a": 1}, 60), "t", None, MOVED])
    assert calls == [ReadOld(SOURCE, "t"), Create(None, {"a": 1}, 60, token="t"), ForgetOld(SOURCE, "t"),
                     Get("t")]
    assert found is MOVED


def test_nothing_to_read_asks_densekv_again_for_a_session_moved_in_meanwhile() -> None:
    """A reader that finds nothing (absent, expired, not decodable): another request may have
    moved it in between this request's read of densekv and of the old store. Its session
    stands: before this rule the Flask, Quart and Starlette shells started this request
    afresh and then ended that session as a stale cookie at their first write."""
    calls, found = play(move_in(SOURCE, "t"), [None, MOVED])
    assert kinds(calls) == ["read_old", "get"] and found is MOVED


@pytest.mark.parametrize("old", [({}, 60), ({"a": 1}, 0)], ids=["no data", "no time left"])
def test_nothing_moves_for_an_empty_or_spent_session(old: Any) -> None:
    calls, found = play(move_in(SOURCE, "t"), [old, None])
    assert "create" not in kinds(calls) and found is None
    assert kinds(calls) == (["read_old", "forget_old"] if not old[0] else ["read_old"])


def test_the_shell_shapes_the_data_and_names_the_identity() -> None:
    shape = lambda d: ({k: [v] for k, v in d.items()}, 12)
    calls, _ = play(move_in(SOURCE, "t", shape=shape), [({"a": 1}, 60), "t", None, MOVED])
    assert calls[1] == Create(12, {"a": [1]}, 60, token="t")


def test_an_identity_densekv_cannot_index_moves_in_anonymous(caplog: pytest.LogCaptureFixture) -> None:
    calls, _ = play(move_in(SOURCE, "t", shape=lambda d: (d, "x" * 10_000)), [({"a": 1}, 60), "t", None, MOVED])
    assert calls[1] == Create(None, {"a": 1}, 60, token="t")
    assert "moves in anonymous" in caplog.text


def test_a_token_live_already_stands_and_the_old_copy_stays() -> None:
    calls, found = play(move_in(SOURCE, "t"), [({"a": 1}, 60), SessionExists("live"), MOVED])
    assert kinds(calls) == ["read_old", "create", "get"] and found is MOVED


@pytest.mark.parametrize("refusal", [SessionDataTooLarge("big"), SessionDataInvalid("odd")])
def test_data_the_store_refuses_stays_where_it_is(refusal: Exception, caplog: pytest.LogCaptureFixture) -> None:
    calls, found = play(move_in(SOURCE, "t"), [({"a": 1}, 60), refusal])
    assert kinds(calls) == ["read_old", "create"] and found is None
    assert "was not moved in" in caplog.text


def test_refused_data_is_written_once_more_as_the_shell_fixes_it() -> None:
    calls, found = play(move_in(SOURCE, "t", fix=lambda d: {"fixed": True}),
                        [({"a": (1,)}, 60), SessionDataInvalid("tuple"), "t", None, MOVED])
    assert calls[2] == Create(None, {"fixed": True}, 60, token="t") and found is MOVED


def test_a_server_error_is_raised() -> None:
    with pytest.raises(ServerUnavailable):
        play(move_in(SOURCE, "t"), [({"a": 1}, 60), ServerUnavailable("down")])


@pytest.mark.parametrize(("left", "bound", "store_ttl", "ttl"), [
    (60, None, 100, 60), (None, None, 100, 100), (600, 300, 100, 100), (50, 300, 100, 50),
    (None, 30, 100, 30)])
def test_the_lifetime_within_the_shells_bound_and_the_stores_ttl(left: Any, bound: Any, store_ttl: int,
                                                                  ttl: int) -> None:
    calls, _ = play(move_in(SOURCE, "t", bound=bound, within_store_ttl=True),
                    [({"a": 1}, left), store_ttl, "t", None, MOVED])
    assert calls[1] == StoreTtl() and calls[2] == Create(None, {"a": 1}, ttl, token="t")


def test_the_lifetime_without_the_stores_ttl_is_what_was_left() -> None:
    calls, _ = play(move_in(SOURCE, "t"), [({"a": 1}, None), "t", None, MOVED])
    assert calls[1] == Create(None, {"a": 1}, None, token="t")


class Old:
    def __init__(self) -> None:
        self.forgotten: list[str] = []

    def read(self, token: str) -> tuple[dict[str, Any], int]:
        return {"a": 1}, 60

    def forget(self, token: str) -> None:
        self.forgotten.append(token)


class Store:
    """What the sync driver calls, recorded (typed calls dispatched by type)."""

    def __init__(self) -> None:
        self.made: list[tuple[Any, ...]] = []

    def create(self, identity: Any, data: Any, ttl: Any, *, token: Any = None, label: Any = None) -> str:
        if self.made:
            raise SessionExists("taken")
        self.made.append((identity, data, ttl, token, label))
        return "t"

    def get(self, token: str, *, undecodable: str = "raise") -> Session | None:
        assert undecodable == "none"
        return MOVED if self.made else None


def test_the_sync_driver_runs_the_calls_and_throws_errors_into_the_flow() -> None:
    old, store = Old(), Store()
    assert run(move_in(old, "t"), store) is MOVED  # type: ignore[arg-type]
    assert store.made == [(None, {"a": 1}, 60, "t", None)] and old.forgotten == ["t"]
    # again: the create raises SessionExists, thrown into the flow, which reads theirs
    assert run(move_in(old, "t"), store) is MOVED  # type: ignore[arg-type]
    assert old.forgotten == ["t"]


def test_an_async_call_under_the_sync_driver_is_an_error() -> None:
    class AsyncOld(Old):
        async def read(self, token: str) -> tuple[dict[str, Any], int]:  # type: ignore[override]
            return {"a": 1}, 60

    source = AsyncOld()
    with pytest.raises(TypeError, match="async driver"):
        run(move_in(source, "t"), Store())  # type: ignore[arg-type]


def test_an_async_shell_binds_a_source_to_the_loops_store_in_one_place() -> None:
    """movein.bind: a reader with no client of its own reads through the session store's
    client (RedisKeyReader.for_store); one with its own client, or a source without
    for_store, is used as it is."""
    from densekv.integrations.movein import RedisKeyReader, bind

    class Store:
        client = object()

    store: Any = Store()
    own: Any = object()
    loose = RedisKeyReader()
    bound = bind(loose, store)
    assert isinstance(bound, RedisKeyReader) and bound.client is Store.client and loose.client is None
    mine = RedisKeyReader(own)
    assert bind(mine, store) is mine
    plain: Any = object()
    assert bind(plain, store) is plain


@pytest.mark.parametrize(("ms", "left"), [(-1, None), (1, 1), (1000, 1), (1001, 2), (600_000, 600)])
def test_a_keys_pttl_is_the_seconds_it_has_left_rounded_up(ms: int, left: int | None) -> None:
    from densekv.integrations.movein import seconds_left

    assert seconds_left(ms) == left


def test_the_load_asks_densekv_first_and_moves_in_only_what_it_lacks() -> None:
    """movein.load, the load every async shell (and aiohttp's flow) runs: densekv's session
    when it has one (the old store is not asked), else the one moved in, else nothing."""
    from densekv.integrations.movein import load

    calls, got = play(load("t", SOURCE), [MOVED])
    assert calls == [Get("t")] and got == (MOVED, None)
    calls, got = play(load("t"), [None])
    assert calls == [Get("t")] and got == (None, None)
    calls, got = play(load("t", SOURCE, bound=30), [None, ({"a": 1}, 60), "t", None, MOVED])
    assert kinds(calls) == ["get", "read_old", "create", "forget_old", "get"]
    assert calls[2] == Create(None, {"a": 1}, 30, token="t") and got == (None, MOVED)
