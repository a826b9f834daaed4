"""The save decision of the web backends (densekv/integrations/decide.py), as a table: what a
request holds when its response is saved -> the store calls, the sessions ended after them
and the cookie. Then `carry`, the flow that turns a decision into calls, fed the results a
store would give (it is pure: no server is involved at all, so none is started)."""

from __future__ import annotations

from typing import Any

import pytest

from densekv.integrations.decide import (
    Call,
    Decision,
    Held,
    Outcome,
    carry,
    decide,
    outlives_no_request,
    store_nothing,
    touch_if_due,
)
from densekv.sessions.model import Session


def read(token: str, identity: Any = None) -> Session:
    return Session(token=token, identity=identity, expires_at=0, data={"a": 1})


R = read("t")
DATA = {"a": 1}

#: (case, held, [(op, args, kwargs)...], ends, cookie)
TABLE: list[tuple[str, Held, list[tuple[str, tuple[Any, ...], dict[str, Any]]], tuple[str, ...], Any]] = [
    ("read only: nothing at all", Held(token="t", read=R), [], (), None),
    ("read only, idle expiry due: touch, no cookie", Held(token="t", read=R, touch_due=True),
     [("touch", (), {})], (), None),
    ("no session, nothing set: nothing", Held(), [], (), None),
    ("no session, data set: create, cookie", Held(modified=True, data=DATA, life=60),
     [("create", (None, DATA, 60), {})], (), "set"),
    ("no session, a login alone: create for the user", Held(modified=True, identity=7),
     [("create", (7, {}, None), {})], (), "set"),
    ("a cookie that loaded nothing, then emptied: end it, delete the cookie",
     Held(stale="old", modified=True), [], ("old",), "delete"),
    ("a cookie that loaded nothing, only read: nothing", Held(stale="old"), [], (), None),
    ("a cookie that loaded nothing, data set: create, then end it",
     Held(stale="old", modified=True, data=DATA), [("create", (None, DATA, None), {})],
     ("old",), "set"),
    ("ended earlier in the request, nothing left: delete the cookie", Held(ended=True), [], (),
     "delete"),
    ("changed keys: one apply against what was read",
     Held(token="t", read=R, modified=True, changed={"b": 2}, removed=["a"], ttl=60),
     [("apply", ({"b": 2}, ["a"]), {"ttl": 60, "read": R})], (), "set"),
    ("changed, the record read is another token's: apply reads again",
     Held(token="u", read=R, modified=True, changed={"b": 2}),
     [("apply", ({"b": 2}, []), {"ttl": ..., "read": None})], (), "set"),
    ("emptied: the stored session ends, the cookie goes",
     Held(token="t", read=R, modified=True, emptied=True), [], ("t",), "delete"),
    ("emptied, keys set after: a new anonymous session first, then the old one ends",
     Held(token="t", read=R, modified=True, emptied=True, data={"flash": "bye"}, life=9),
     [("create", (None, {"flash": "bye"}, 9), {})], ("t",), "set"),
    (("login with changes: login first (a refused one writes nothing), then apply (lifetime in "
     "it) to the new token, reading it, no set_ttl"),
     Held(token="t", read=R, modified=True, changed={"b": 2}, identity=7, rotate="login", ttl=60,
          life=60),
     [("login", (7,), {}), ("apply", ({"b": 2}, []), {"ttl": 60, "read": None})], (), "set"),
    ("login with changes, lifetime kept: login, apply, then set_ttl",
     Held(token="t", read=R, modified=True, changed={"b": 2}, identity=7, rotate="login", life=60),
     [("login", (7,), {}), ("apply", ({"b": 2}, []), {"ttl": ..., "read": None}),
      ("set_ttl", (60,), {})], (), "set"),
    ("login with a device label: login passes it",
     Held(token="t", read=R, modified=True, identity=7, rotate="login", label="Firefox on Linux",
          renew_on_rotate=False),
     [("login", (7,), {"label": "Firefox on Linux"})], (), "set"),
    ("no session, a login with a device label: the create passes it",
     Held(modified=True, identity=7, label="curl"), [("create", (7, {}, None), {"label": "curl"})],
     (), "set"),
    ("an anonymous create never passes a label",
     Held(modified=True, data=DATA, label="curl"), [("create", (None, DATA, None), {})], (), "set"),
    ("regenerate never passes a label",
     Held(token="t", read=R, modified=True, rotate="regenerate", renew_on_rotate=False, label="x"),
     [("regenerate", (), {})], (), "set"),
    ("regenerate alone: regenerate, restart the lifetime",
     Held(token="t", read=R, modified=True, rotate="regenerate", life=30),
     [("regenerate", (), {}), ("set_ttl", (30,), {})], (), "set"),
    ("regenerate where a new cookie does not restart the lifetime",
     Held(token="t", read=R, modified=True, rotate="regenerate", renew_on_rotate=False),
     [("regenerate", (), {})], (), "set"),
    ("rotated earlier, lifetime written then: only the cookie",
     Held(token="t", read=R, rotated=True, lifetime_set=True, touch_due=True), [], (), "set"),
    ("rotated earlier, lifetime not written: set_ttl, cookie",
     Held(token="t", read=R, rotated=True, life=None), [("set_ttl", (None,), {})], (), "set"),
    ("refresh each request, refresh due: set_ttl and the cookie",
     Held(token="t", read=R, refresh=True, refresh_ttl=True, life=100, touch_due=True),
     [("set_ttl", (100,), {})], (), "set"),
    ("refresh each request, not due: the cookie, a touch if due",
     Held(token="t", read=R, refresh=True, touch_due=True), [("touch", (), {})], (), "set"),
    ("a write never touches as well",
     Held(token="t", read=R, modified=True, changed={"b": 2}, touch_due=True),
     [("apply", ({"b": 2}, []), {"ttl": ..., "read": R})], (), "set"),
    ("no session, data set, a token told to the app already: the create stores under it",
     Held(modified=True, data=DATA, new_token="drawn"),
     [("create", (None, DATA, None), {"token": "drawn"})], (), "set"),
    ("a token told to the app, a cookie that loaded nothing: create under the told one, end the old",
     Held(stale="old", modified=True, data=DATA, new_token="drawn"),
     [("create", (None, DATA, None), {"token": "drawn"})], ("old",), "set"),
    ("a token told to the app, nothing set: nothing stored, no cookie",
     Held(new_token="drawn"), [], (), None),
    ("modified but no key changed, no refresh: nothing written, no cookie",
     Held(token="t", read=R, modified=True), [], (), None),
]


@pytest.mark.parametrize(("case", "held", "steps", "ends", "cookie"), TABLE, ids=[t[0] for t in TABLE])
def test_decide(case: str, held: Held, steps: list[tuple[str, tuple[Any, ...], dict[str, Any]]],
                ends: tuple[str, ...], cookie: Any) -> None:
    decision = decide(held)
    assert [(s.op, s.args, dict(s.kwargs)) for s in decision.steps] == steps, case
    assert decision.ends == ends, case
    assert decision.cookie == cookie, case


def test_decide_does_not_keep_the_callers_mappings() -> None:
    data, changed, removed = {"a": 1}, {"b": 2}, ["c"]
    made = decide(Held(modified=True, data=data))
    applied = decide(Held(token="t", modified=True, changed=changed, removed=removed))
    data["x"] = changed["x"] = 0
    removed.append("d")
    assert made.steps[0].args[1] == {"a": 1}
    assert applied.steps[0].args == ({"b": 2}, ["c"])


def run(decision: Decision, token: str | None, results: dict[str, Any]) -> tuple[list[Call], Outcome]:
    """Drive carry() as a store would answer: `results` by call name."""
    flow, calls, result = carry(decision, token), [], None
    while True:
        try:
            call = flow.send(result)
        except StopIteration as done:
            return calls, done.value
        calls.append(call)
        result = results[call.name]


def names(calls: list[Call]) -> list[tuple[str, tuple[Any, ...]]]:
    return [(c.name, c.args) for c in calls]


def test_carry_runs_the_calls_on_the_current_token_and_ends_after() -> None:
    d = decide(Held(token="t", read=R, stale="old", modified=True, changed={"b": 2},
                    identity=7, rotate="login", ttl=5))
    calls, out = run(d, "t", {"apply": {"a": 1, "b": 2}, "login": "n", "destroy": True})
    assert names(calls) == [("login", ("t", 7)), ("apply", ("n", {"b": 2}, [])),
                            ("destroy", ("old",))]
    assert out == Outcome("n", "set", False, {"a": 1, "b": 2})


def test_carry_a_create_gives_the_new_token() -> None:
    calls, out = run(decide(Held(modified=True, data=DATA)), None, {"create": "new"})
    assert names(calls) == [("create", (None, DATA, None))]
    assert (out.token, out.cookie) == ("new", "set")


@pytest.mark.parametrize("gone_at", ["apply", "login"])
def test_carry_a_session_gone_meanwhile_is_never_recreated(gone_at: str) -> None:
    d = decide(Held(token="t", read=R, stale="old", modified=True, changed={"b": 2},
                    identity=7, rotate="login", ttl=5))
    results = {"apply": {"b": 2}, "login": "n", "destroy": True, gone_at: None}
    calls, out = run(d, "t", results)
    assert [c.name for c in calls][-1] == "destroy" and "create" not in [c.name for c in calls]
    assert (out.token, out.cookie, out.gone) == (None, "delete", True)


def test_carry_gone_with_a_pending_login_creates_a_session_for_it() -> None:
    d = decide(Held(token="t", read=R, modified=True, changed={"b": 2}, data={"b": 2},
                    identity=7, rotate="login", life=60, gone="create"))
    calls, out = run(d, "t", {"login": None, "create": "fresh"})
    assert names(calls) == [("login", ("t", 7)), ("create", (7, {"b": 2}, 60))]
    assert (out.token, out.cookie, out.gone) == ("fresh", "set", True)


def test_carry_gone_raise_tells_the_shell_and_sends_no_cookie() -> None:
    d = decide(Held(token="t", refresh=True, refresh_ttl=True, gone="raise"))
    calls, out = run(d, "t", {"set_ttl": False})
    assert names(calls) == [("set_ttl", ("t", None))]
    assert (out.cookie, out.gone) == (None, True)


def test_carry_a_touch_that_finds_nothing_changes_no_cookie() -> None:
    calls, out = run(decide(Held(token="t", read=R, touch_due=True)), "t", {"touch": False})
    assert names(calls) == [("touch", ("t",))]
    assert out == Outcome("t", None, False, None)


def test_carry_an_apply_that_empties_the_data_is_not_gone() -> None:
    d = decide(Held(token="t", read=R, modified=True, removed=["a"]))
    _, out = run(d, "t", {"apply": {}})
    assert (out.gone, out.merged, out.cookie) == (False, {}, "set")


# -- the read-only rows as every shell runs them (touch_if_due) ------------------------------
def play(flow: Any, answers: dict[str, Any]) -> list[Call]:
    """The calls of `flow`, each answered by name from `answers`."""
    calls, result = [], None
    while True:
        try:
            call = flow.send(result)
        except StopIteration:
            return calls
        calls.append(call)
        result = answers.get(call.name)


@pytest.mark.parametrize("due", [False, True], ids=["nothing due", "idle expiry due"])
@pytest.mark.parametrize("asked", [False, True], ids=["the shell holds the store", "the driver is asked"])
def test_touch_if_due_answers_the_read_only_rows_as_decide_does(due: bool, asked: bool) -> None:
    """A shell answers a read-only request (most requests) with touch_if_due instead of
    building Held: the same calls as decide()'s two read-only rows, and no cookie (it
    returns nothing to send). With the store at hand the shell passes its due_for_touch;
    a flow without it (Django's engine) asks the driver (DueForTouch)."""
    seen: list[Session] = []

    def due_for_touch(session: Session) -> bool:
        seen.append(session)
        return due

    flow = touch_if_due("t", R) if asked else touch_if_due("t", R, due_for_touch)
    calls = [c for c in play(flow, {"due_for_touch": due}) if c.name != "due_for_touch"]
    expected, _ = run(decide(Held(token="t", read=R, touch_due=due)), "t", {"touch": True})
    assert calls == expected
    assert seen == ([] if asked else [R])


def test_touch_if_due_without_a_stored_session_asks_nothing() -> None:
    assert play(touch_if_due("t", None), {}) == []


@pytest.mark.parametrize(("life", "none_kept"), [(None, False), (1, False), (3600, False), (0, True),
                                                  (-5, True)])
def test_a_lifetime_under_a_second_keeps_nothing(life: int | None, none_kept: bool) -> None:
    assert outlives_no_request(life) is none_kept


@pytest.mark.parametrize(("token", "changed", "stale", "ended"), [
    ("t", True, None, ["t"]),
    ("t", False, None, []),  # read only: nothing at all
    (None, True, "old", ["old"]),  # a cookie that loaded nothing ends, as decide() ends it
    ("t", True, "old", ["old", "t"]),
    (None, True, None, []),
])
def test_a_session_that_outlives_no_request_stores_nothing(token: str | None, changed: bool,
                                                           stale: str | None, ended: list[str]) -> None:
    calls = play(store_nothing(token, changed, stale), {})
    assert [(c.name, c.args) for c in calls] == [("destroy", (t,)) for t in ended]
