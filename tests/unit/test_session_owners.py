"""The session store's small owners on their own, no server and no core: model.Lifetime (ttl
and idle_ttl, a record's expiries, when a touch is due) and events.Recorder (what is
recorded, and only while something listens). Rotations are flows over a core's plans:
tests/unit/test_core_sessions.py (regenerate, login) and tests/behaviour."""

from __future__ import annotations

import pytest

from densekv.errors import InvalidArgument
from densekv.sessions.events import Recorder
from densekv.sessions.model import Lifetime, Record, Session

NOW = 1_800_000_000
DIGEST = bytes(range(16))


@pytest.mark.parametrize(("ttl", "idle_ttl"), [(0, None), (2**31, None), (60, 0), (60, 2**31)])
def test_a_lifetime_out_of_range_is_refused(ttl: int, idle_ttl: int | None) -> None:
    with pytest.raises(InvalidArgument, match="from 1 to 2"):
        Lifetime.of(ttl, idle_ttl)


def test_a_lifetime_gives_a_records_expiries() -> None:
    assert Lifetime.of(3600, None).expiries(NOW, 3600) == (NOW + 3600, NOW + 3600)
    assert Lifetime.of(3600, 600).expiries(NOW, 3600) == (NOW + 600, NOW + 3600)
    assert Lifetime.of(3600, 600).expiries(NOW, 300) == (NOW + 300, NOW + 300)  # idle never past absolute


def test_a_creates_ttl_in_seconds() -> None:
    life = Lifetime.of(3600, None)
    assert life.seconds(None, NOW) == 3600
    assert life.seconds(90.5, NOW) == 90
    for wrong in (0, True, "60", 2**32):
        with pytest.raises(InvalidArgument, match="store's 3600"):
            life.seconds(wrong, NOW)
    with pytest.raises(InvalidArgument, match="after 2106"):
        life.seconds(2**32 - NOW, NOW)


def test_a_touch_is_due_once_a_quarter_of_the_idle_window_passed() -> None:
    life = Lifetime.of(3600, 400)
    fresh = Session("t", None, NOW + 400, absolute_at=NOW + 3600)
    assert not life.due_for_touch(fresh, NOW)
    assert not life.due_for_touch(fresh, NOW + 99)
    assert life.due_for_touch(fresh, NOW + 100)
    at_its_end = Session("t", None, NOW + 400, absolute_at=NOW + 400)  # a touch would not move it
    assert not life.due_for_touch(at_its_end, NOW + 300)
    assert not Lifetime.of(3600, None).due_for_touch(fresh, NOW + 300)


def test_nothing_listening_the_recorder_builds_no_event() -> None:
    recorder = Recorder(None, lambda: NOW)
    recorder.emit("created", DIGEST, 7, "create")
    recorder.sized(100)
    assert recorder.events is None and recorder.outbox is None


def test_the_recorder_records_for_observers_while_they_listen() -> None:
    recorder = Recorder(None, lambda: NOW)
    recorder.listen(True)
    recorder.emit("rotated", DIGEST, 7, "login", old=bytes(16), label="phone")
    recorder.sized(100)
    assert recorder.events is not None
    (event,) = recorder.events.take()
    assert (event.kind, event.session_id, event.identity, event.cause, event.at, event.old_session_id,
            event.label) == ("rotated", DIGEST.hex(), 7, "login", NOW, "00" * 16, "phone")
    assert recorder.events.take_sizes() == [100]
    recorder.listen(False)
    assert recorder.events is None


def test_the_recorder_keeps_the_stream_its_own_events() -> None:
    with pytest.raises(InvalidArgument, match="events_stream"):
        Recorder(0, lambda: NOW)
    recorder = Recorder(1000, lambda: NOW)
    assert recorder.stream == 1000 and recorder.outbox is not None
    live = Record(DIGEST, 7, NOW + 10, NOW + 10)
    dead = Record(DIGEST, 7, NOW - 10, NOW + 100)  # idled out before its absolute end
    recorder.emit_removed(live, "logout", "destroy", NOW)
    recorder.emit_removed(dead, "", "sweep", NOW)
    recorder.emit_removed(dead, "", "sweep", NOW, stream=False)  # announced already: not again
    assert [(e.kind, e.cause, e.found_by) for e in recorder.outbox.take()] == [
        ("destroyed", "logout", None), ("expired", "idle", "sweep")]
