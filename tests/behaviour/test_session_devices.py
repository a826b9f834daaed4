"""'Your devices' (track_devices=True): sessions_of lists each session's login time, last
seen (the touch granularity) and label; regenerate keeps them, a new login's label
replaces; revoke one by id from another store (another worker); log out the other
devices; labels checked before anything is written; every layout, every server, the
cluster; a store without track_devices writes the index as before (format 0)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from densekv.errors import InvalidArgument
from densekv.sessions import SessionStore
from densekv.sessions.index import unpack_entry
from tests.behaviour.test_sessions import Clock, layouts_for


def _devices(store: SessionStore, identity: Any) -> dict[str, tuple[int, int, str | None]]:
    out = {}
    for s in store.sessions_of(identity):
        assert s.device is not None
        out[s.id] = (s.device.created_at, s.device.last_seen, s.device.label)
    return out


@pytest.mark.parametrize("idle", [None, 1000])
def test_devices_on_every_layout(client: Any, idle: int | None) -> None:
    for layout in layouts_for(client):
        clock = Clock()
        t0 = int(clock.now)
        ns = f"dev-{layout}-{idle}-{time.time_ns()}"
        store = SessionStore(client, ns, layout=layout, idle_ttl=idle, track_devices=True, clock=clock)
        phone = store.login(store.create(None), "ada", label="Firefox on Android")
        clock.now += 5
        laptop = store.create("ada", label="Safari on macOS")
        assert phone is not None
        ids = {store.get(phone).id: "phone", store.get(laptop).id: "laptop"}  # type: ignore[union-attr]
        got = {ids[k]: v for k, v in _devices(store, "ada").items()}
        assert got == {"phone": (t0, t0, "Firefox on Android"), "laptop": (t0 + 5, t0 + 5, "Safari on macOS")}, layout
        clock.now += 400
        assert store.touch(phone)
        phone2 = store.regenerate(phone)  # the same device: login time and label kept
        assert phone2 is not None
        got = {s.id: s.device for s in store.sessions_of("ada")}
        dev = got[store.get(phone2).id]  # type: ignore[union-attr]
        assert dev is not None and (dev.created_at, dev.label) == (t0, "Firefox on Android")
        assert dev.last_seen == (t0 + 405 if idle else t0), layout
        relabelled = store.login(phone2, "ada", label="Firefox 2")
        assert relabelled is not None
        dev = {s.id: s.device for s in store.sessions_of("ada")}[store.get(relabelled).id]  # type: ignore[union-attr]
        assert dev is not None and (dev.created_at, dev.label) == (t0, "Firefox 2")
        # revoke one by id from another worker's store
        other = SessionStore(client, ns, layout=layout, idle_ttl=idle, track_devices=True, clock=clock)
        laptop_id = store.get(laptop).id  # type: ignore[union-attr]
        assert not other.destroy_id(laptop_id, identity="bob")  # not bob's: untouched
        assert store.get(laptop) is not None
        assert other.destroy_id(laptop_id, identity="ada")
        assert store.get(laptop) is None and len(store.sessions_of("ada")) == 1
        # log out the other devices, this one kept
        more = [store.create("ada", label=f"tab {i}") for i in range(3)]
        assert store.destroy_all("ada", keep=relabelled) == 3
        assert [s.device.label for s in store.sessions_of("ada")] == ["Firefox 2"]  # type: ignore[union-attr]
        assert all(store.get(t) is None for t in more)


def test_labels_are_checked_before_anything_is_written(client: Any) -> None:
    store = SessionStore(client, f"devl-{time.time_ns()}", layout="dense", track_devices=True)
    anon = store.create(None)
    for bad in ("x" * 33, "é" * 17, 5, "\udcff"):
        with pytest.raises(InvalidArgument):
            store.login(anon, 1, label=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            store.create(1, label=bad)  # type: ignore[arg-type]
    assert store.get(anon) is not None and store.sessions_of(1) == []
    assert store.login(anon, 1, label="é" * 16) is not None  # 32 bytes: fits
    plain = SessionStore(client, f"devp-{time.time_ns()}", layout="dense")
    with pytest.raises(InvalidArgument):
        plain.create(1, label="phone")


def test_devices_on_the_cluster(cluster_client: Any) -> None:
    store = SessionStore(cluster_client, f"devc-{time.time_ns()}", layout="dense", track_devices=True)
    tokens = [store.login(store.create(None), 9, label=f"d{i}") for i in range(10)]
    assert sorted(s.device.label for s in store.sessions_of(9)) == sorted(f"d{i}" for i in range(10))  # type: ignore[union-attr]
    assert store.destroy_all(9, keep=tokens[0]) == 9
    assert [s.device.label for s in store.sessions_of(9)] == ["d0"]  # type: ignore[union-attr]


def test_index_format_follows_the_options(client: Any) -> None:
    ns = f"devf-{time.time_ns()}"
    plain = SessionStore(client, ns, layout="dense")
    plain.create(3)
    tracked = SessionStore(client, ns + "t", layout="dense", track_devices=True)
    tracked.create(3, label="x")
    values = {}
    for name in (ns, ns + "t"):
        for key in client.scan_iter(match=f"{name}:si:*"):
            values[name] = list(client.hgetall(key).values())
    assert unpack_entry(values[ns][0]) is None and values[ns][0].isdigit()  # format 0: a day number
    entry = unpack_entry(values[ns + "t"][0])
    assert entry is not None and entry.label == "x"
    # a tracked store reads a session listed in format 0 (before the option was on: the
    # namespace's record changed first, or the tracked store would not open)
    plain.change_lifecycle(track_devices=True)
    mixed = SessionStore(client, ns, layout="dense", track_devices=True)
    assert [s.device for s in mixed.sessions_of(3)] == [None]
    raw = values[ns + "t"][0]
    assert raw[0] == 0xD2 and len(raw) == 9 + 1 and entry.expires_at is None  # format 2: devices, no limit
    limited = SessionStore(client, ns + "l", layout="dense", max_sessions_per_identity=3)
    limited.create(3)
    (key,) = client.scan_iter(match=f"{ns}l:si:*")
    (raw,) = client.hgetall(key).values()
    assert raw[0] == 0xD1 and len(raw) == 17  # format 1: what the limit reads


@pytest.mark.parametrize("layout", ["dense", "json"])
def test_a_namespace_whose_options_change_keeps_each_device(client: Any, layout: str) -> None:
    """Devices alone write format 2 and a limit format 1 (index.py); a rotation under the
    other options (the namespace's record changed: change_lifecycle) carries the device's
    login time and label into the other format, and the limit counts a format-2 device as a
    line of its own."""
    clock = Clock()
    t0 = int(clock.now)
    ns = f"devx-{layout}-{time.time_ns()}"
    devices = SessionStore(client, ns, layout=layout, track_devices=True, clock=clock)
    phone = devices.create("ada", label="phone")
    laptop = devices.create("ada", label="laptop")
    clock.now += 10
    devices.change_lifecycle(max_sessions_per_identity=2)
    limited = SessionStore(client, ns, layout=layout, track_devices=True, max_sessions_per_identity=2,
                           clock=clock)
    phone2 = limited.regenerate(phone)  # format 2 -> format 1: a new line, created and label carried
    assert phone2 is not None
    assert sorted((s.device.created_at, s.device.label) for s in limited.sessions_of("ada")) == [  # type: ignore[union-attr]
        (t0, "laptop"), (t0, "phone")]
    tablet = limited.create("ada", label="tablet")  # a third line: the least recently seen goes
    left = sorted(s.device.label for s in limited.sessions_of("ada"))  # type: ignore[union-attr]
    assert len(left) == 2 and "tablet" in left
    clock.now += 10
    survivor = next(t for t in (phone2, laptop) if limited.get(t) is not None)
    limited.change_lifecycle(max_sessions_per_identity=None)
    devices = SessionStore(client, ns, layout=layout, track_devices=True, clock=clock)
    back = devices.regenerate(survivor)  # format 1 -> format 2: created and label kept
    assert back is not None
    got = {s.device.label: s.device.created_at for s in devices.sessions_of("ada")}  # type: ignore[union-attr]
    assert got == {"tablet": t0 + 10, next(lbl for lbl in left if lbl != "tablet"): t0}
    for key in client.scan_iter(match=f"{ns}:si:*"):
        assert {v[0] for v in client.hgetall(key).values()} == {0xD1, 0xD2}
    assert devices.get(tablet) is not None


def test_a_format_2_entry_follows_a_longer_life_and_is_swept_after_it(client: Any) -> None:
    clock = Clock()
    store = SessionStore(client, f"devs-{time.time_ns()}", layout="dense", ttl=60, track_devices=True, clock=clock)
    token = store.create(5, label="phone")
    assert store.set_ttl(token, 3 * 86400)  # ix_seen rewrites the entry's absolute_at
    clock.now += 2 * 86400
    store.sweep()
    assert [s.device.label for s in store.sessions_of(5)] == ["phone"]  # type: ignore[union-attr]
    clock.now += 2 * 86400
    store.sweep()  # the session is dead now, and its entry goes with it
    assert store.sessions_of(5) == []
    assert not any(client.hlen(k) for k in client.scan_iter(match=f"{store.namespace}:si:*"))
