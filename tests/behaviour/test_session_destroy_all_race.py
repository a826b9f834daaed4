"""Log out everywhere against sessions that rotate at that very moment.

destroy_all read the identity index, then deleted what it found; a regenerate or login
landing between the two moved a session to a digest destroy_all never looked at, and it
stayed logged in (issue 21: 3 of 5 laptops). Here threads rotate every session of one user
as fast as they can while destroy_all runs, on every layout and on the cluster: when it
returns, no session of that user is alive, whatever token its rotator holds.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from densekv.sessions import SessionStore
from tests.behaviour.test_reliability_limits import LAYOUTS, store_for

SESSIONS = 12
ROTATORS = 4


def _race(store: SessionStore, uid: int, rounds: int = 3) -> None:
    for attempt in range(rounds):
        tokens = [store.create(uid, {"n": n, "attempt": attempt}) for n in range(SESSIONS)]
        bystander = store.create(uid + 1, {"other": True})
        holders: list[list[str | None]] = [[t] for t in tokens]
        stop = threading.Event()
        errors: list[BaseException] = []

        def rotate(mine: list[list[str | None]], stop: threading.Event = stop,
                   errors: list[BaseException] = errors) -> None:
            try:
                while not stop.is_set():
                    for i, held in enumerate(mine):
                        token = held[0]
                        if token is None:
                            continue
                        # regenerate, and now and then a login of the same user (cycle_key)
                        held[0] = store.login(token, uid) if i % 3 == 0 else store.regenerate(token)
                    if all(h[0] is None for h in mine):
                        return
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=rotate, args=(holders[k::ROTATORS],)) for k in range(ROTATORS)]
        for t in threads:
            t.start()
        time.sleep(0.02)  # rotations under way
        store.destroy_all(uid)
        survivors = [s for s in store.sessions_of(uid)]
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert survivors == [], f"attempt {attempt}: {len(survivors)} sessions survived destroy_all"
        assert all(h[0] is None or store.get(h[0]) is None for h in holders)
        assert store.get(bystander) is not None  # another user's session is untouched
        store.destroy(bystander)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_destroy_all_ends_sessions_that_rotate_while_it_runs(client: redis.Redis, layout: str) -> None:
    _race(store_for(client, layout), uid=500)


def test_destroy_all_ends_rotating_sessions_on_a_cluster(cluster_client: redis.RedisCluster) -> None:
    for layout in ("dense", "packed"):
        store: Any = SessionStore(cluster_client, namespace=f"race{layout}", layout=layout,
                                  expected_sessions=1000, auto_train=None)
        _race(store, uid=900, rounds=2)
