"""Login, regenerate, logout and log out everywhere of the web shells that act at once
(densekv/integrations/identity_flows.py), as a table: the session a flow finds -> the store
calls it yields, fed the results a store would give, and the session it leaves. The flows are
pure (no server is involved at all, so none is started); a result that is an exception is
thrown into the flow at that call, as integrations/drive.py does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from densekv.errors import SessionLimitReached
from densekv.integrations import identity_flows as flows
from densekv.integrations.calls import (
    Create,
    Destroy,
    DestroyAll,
    Login,
    Regenerate,
    StoreCall,
    StoreTtl,
)
from densekv.integrations.drive import Flow
from densekv.integrations.identity_flows import Rebind

DATA = {"a": 1}
REFUSED = SessionLimitReached("refused")


def play(flow: Flow[None], results: list[Any], calls: list[StoreCall] | None = None) -> list[StoreCall]:
    """Run `flow`, answering its calls with `results` in order; the calls it made (kept in
    `calls` too, for a flow that raises)."""
    calls = [] if calls is None else calls
    answers = iter(results)
    try:
        call = next(flow)
        while True:
            calls.append(call)
            answer = next(answers)
            call = flow.throw(answer) if isinstance(answer, Exception) else flow.send(answer)
    except StopIteration:
        pass
    assert next(answers, "none left") == "none left", "the flow made fewer calls than scripted"
    return calls


def login(identity: Any, data: dict[str, Any] | None = None, label: str | None = None,
          max_age: int | None = None) -> Callable[[Rebind], Flow[None]]:
    return lambda held: flows.login(held, identity, DATA if data is None else data, label, max_age)


def ended() -> Rebind:
    return Rebind(None, None, None, {}, ended=True)


#: (case, session found, flow, results fed, calls expected, session left)
TABLE: list[tuple[str, Rebind, Callable[[Rebind], Flow[None]], list[Any], list[StoreCall], Rebind]] = [
    ("login, anonymous stored session: one atomic login, data and changes stand",
     Rebind("t", None), login(7, label="phone"), ["t2"], [Login("t", 7, "phone")],
     Rebind("t2", 7, rotated=True)),
    ("login as the same user: the same atomic login", Rebind("t", 7), login(7), ["t2"],
     [Login("t", 7)], Rebind("t2", 7, rotated=True)),
    ("login as another user: the old session ends, an empty one is created",
     Rebind("t", 8), login(7, label="phone", max_age=60), [None, 3600, "n"],
     [Destroy("t"), StoreTtl(), Create(7, {}, 60, label="phone")],
     Rebind("n", 7, data={}, written=True, rotated=True)),
    ("login, no stored session: a create for the user with the data, the store's ttl",
     Rebind(None, None), login(7), ["n"], [Create(7, DATA, None)],
     Rebind("n", 7, data=DATA, written=True, rotated=True)),
    ("login, max_age past the store's ttl: the store's ttl bounds it",
     Rebind(None, None), login(7, max_age=9000), [3600, "n"], [StoreTtl(), Create(7, DATA, 3600)],
     Rebind("n", 7, data=DATA, written=True, rotated=True)),
    ("login, max_age under a second: the store's ttl (the save ends what outlives nothing)",
     Rebind(None, None), login(7, max_age=0), ["n"], [Create(7, DATA, None)],
     Rebind("n", 7, data=DATA, written=True, rotated=True)),
    ("login, a cookie that loaded nothing: it ends before the create",
     Rebind(None, None, "old"), login(7), [None, "n"], [Destroy("old"), Create(7, DATA, None)],
     Rebind("n", 7, data=DATA, written=True, rotated=True)),
    ("login, the session gone meanwhile: created for the user with the data",
     Rebind("t", None), login(7), [None, "n"], [Login("t", 7), Create(7, DATA, None)],
     Rebind("n", 7, data=DATA, written=True, rotated=True)),
    ("login refused (SessionLimitReached): the session as it was", Rebind("t", None, None),
     login(7), [REFUSED], [Login("t", 7)], Rebind("t", None)),
    ("login refused at the create: the cookie token that loaded nothing ended, nothing else",
     Rebind(None, None, "old"), login(7), [None, REFUSED], [Destroy("old"), Create(7, DATA, None)],
     Rebind(None, None)),
    ("login as another user refused: the old session ended, the session is empty, no token",
     Rebind("t", 8), login(7), [None, REFUSED], [Destroy("t"), Create(7, {}, None)],
     Rebind(None, None, data={})),
    ("regenerate: a new token, data and identity kept", Rebind("t", 7), flows.regenerate,
     ["t2"], [Regenerate("t")], Rebind("t2", 7, rotated=True)),
    ("regenerate, the session gone meanwhile: it ends", Rebind("t", 7), flows.regenerate,
     [None], [Regenerate("t")], ended()),
    ("regenerate, no stored session: nothing", Rebind(None, None), flows.regenerate, [], [],
     Rebind(None, None)),
    ("logout: the session ends", Rebind("t", 7), flows.logout, [True], [Destroy("t")], ended()),
    ("logout, a cookie that loaded nothing: it ends", Rebind(None, None, "old"), flows.logout,
     [True], [Destroy("old")], ended()),
    ("logout, nothing stored: nothing to end, the session is empty", Rebind(None, None),
     flows.logout, [], [], ended()),
    ("log out everywhere: every session of the user", Rebind("t", 7),
     lambda held: flows.logout(held, everywhere=True), [3], [DestroyAll(7)], ended()),
    ("log out everywhere, anonymous: this session alone", Rebind("t", None),
     lambda held: flows.logout(held, everywhere=True), [True], [Destroy("t")], ended()),
]


@pytest.mark.parametrize(("case", "found", "flow", "results", "calls", "left"), TABLE,
                         ids=[row[0] for row in TABLE])
def test_identity_flows(case: str, found: Rebind, flow: Callable[[Rebind], Flow[None]],
                        results: list[Any], calls: list[StoreCall], left: Rebind) -> None:
    made: list[StoreCall] = []
    refused = any(r is REFUSED for r in results)
    try:
        play(flow(found), results, made)
    except SessionLimitReached:
        assert refused, "raised without a refusal scripted"
    else:
        assert not refused, "a refusal did not raise out of the flow"
    assert made == calls
    assert found == left


def test_a_refused_call_raises_out_of_the_flow() -> None:
    held = Rebind("t", None)
    with pytest.raises(SessionLimitReached):
        play(flows.login(held, 7, DATA), [REFUSED])
    assert not held.changed


def test_a_login_passes_the_data_as_a_copy() -> None:
    data = {"a": 1}
    held = Rebind(None, None)
    calls = play(flows.login(held, 7, data), ["n"])
    assert calls == [Create(7, data, None)]
    data["b"] = 2
    assert held.data == {"a": 1}


@pytest.mark.parametrize(("current", "identity", "switch"), [
    (None, 7, False),  # an anonymous session's data is the user's now
    (7, 7, False),  # the same user: kept
    (8, 7, True),  # another user's: the old session ends, the login starts empty
    ("x", 7, True),
])
def test_a_login_as_another_user_switches(current: Any, identity: Any, switch: bool) -> None:
    assert flows.switches(current, identity) is switch


@pytest.mark.parametrize(("tokens", "everywhere", "calls"), [
    ([], (), []),
    (["t"], (), [Destroy("t")]),
    (["t", "u"], (7, "7"), [DestroyAll(7), DestroyAll("7"), Destroy("t"), Destroy("u")]),
])
def test_the_logouts_asked_for_end_at_the_save_every_identity_first(
        tokens: list[str], everywhere: tuple[Any, ...], calls: list[StoreCall]) -> None:
    assert play(flows.end_asked(tokens, everywhere), [True] * len(calls)) == calls
