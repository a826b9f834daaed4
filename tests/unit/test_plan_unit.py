"""Plans without a server: slot checks, reply folding, RESP encoding, script files."""

from __future__ import annotations

from importlib.resources import files

import hiredis
import pytest
from redis.exceptions import ResponseError

from densekv.capabilities import version_tuple
from densekv.errors import PlanError
from densekv.executors import Wire
from densekv.lua import script
from densekv.plan import Command, Plan, ScriptCall
from densekv.tools.bulk import encode_commands
from densekv.tools.measure import log_checkpoints
from densekv.tools.server.cluster import slot_ranges


def test_plan_with_keys_in_two_slots_is_refused() -> None:
    plan = Plan((Command(("MSET", "a", "1", "b", "2"), ("a", "b")),))
    with pytest.raises(PlanError, match="slots"):
        plan.slot()


def test_hash_tag_puts_keys_in_one_slot() -> None:
    plan = Plan((Command(("MSET", "{p1}:a", "1", "{p1}:b", "2"), ("{p1}:a", "{p1}:b")),))
    assert plan.slot() is not None


def test_script_inside_multi_is_refused() -> None:
    with pytest.raises(PlanError):
        Plan((ScriptCall(script("compare_and_set"), ("k",), ("a", "b", "present")),), atomic=True)


def test_empty_plan_is_refused() -> None:
    with pytest.raises(PlanError):
        Plan(())


def test_wire_folds_replies_per_plan_and_unwraps_exec() -> None:
    p1 = Plan((Command(("GET", "a"), ("a",)),))
    p2 = Plan((Command(("SET", "b", "1"), ("b",)), Command(("INCR", "b"), ("b",))), atomic=True)
    wire = Wire.build([p1, p2], preload=[script("compare_and_set")])
    assert wire.commands[0][:2] == ("SCRIPT", "LOAD")
    assert [c[0] for c in wire.commands[1:]] == ["GET", "MULTI", "SET", "INCR", "EXEC"]
    replies = ["sha", b"x", b"OK", b"QUEUED", b"QUEUED", [b"OK", 2]]
    assert wire.replies_of(replies) == [[b"x"], [b"OK", 2]]


def test_wire_reports_the_queueing_error_of_an_aborted_multi() -> None:
    p = Plan((Command(("SET", "b", "1"), ("b",)), Command(("BOGUS",), ("b",))), atomic=True)
    wire = Wire.build([p], preload=[])
    err = ResponseError("ERR unknown command 'BOGUS'")
    folded = wire.replies_of([b"OK", b"QUEUED", err, ResponseError("EXECABORT")])
    assert folded == [[err, err]]


@pytest.mark.parametrize(
    "commands",
    [
        [("SET", "k", "v")],
        [("SET", b"\x00\r\n", 12), ("GET", "k")],
        [("HSET", "h", "f", "é"), ("INCRBYFLOAT", "x", 1.5)],
    ],
)
def test_resp_encoding_round_trips_through_a_real_parser(commands: list[tuple[object, ...]]) -> None:
    reader = hiredis.Reader()
    reader.feed(encode_commands(commands))
    for cmd in commands:
        parsed = reader.gets()
        expected = [
            a if isinstance(a, bytes) else (a.encode() if isinstance(a, str) else repr(a).encode() if isinstance(a, float) else str(a).encode())
            for a in cmd
        ]
        assert parsed == expected
    assert reader.gets() is False


def test_resp_encoding_refuses_other_types() -> None:
    with pytest.raises(TypeError):
        encode_commands([("SET", "k", None)])


def test_every_lua_script_states_its_contract() -> None:
    scripts = [p for p in files("densekv.lua").iterdir() if p.name.endswith(".lua")]
    assert scripts
    for path in scripts:
        header = "\n".join(line for line in path.read_text().splitlines() if line.startswith("--"))
        assert "KEYS" in header and "ARGV" in header and "Reply" in header, path.name


def test_slot_ranges_cover_all_slots_once() -> None:
    for masters in (1, 2, 3, 5):
        ranges = slot_ranges(masters)
        covered = [s for lo, hi in ranges for s in range(lo, hi + 1)]
        assert covered == list(range(16384))


def test_log_checkpoints_end_at_n_and_grow() -> None:
    points = log_checkpoints(100_000)
    assert points[0] == 1000 and points[-1] == 100_000
    assert points == sorted(set(points))
    assert log_checkpoints(500) == [500]


@pytest.mark.parametrize("text,expected", [("7.0.15", (7, 0, 15)), ("9.1.2", (9, 1, 2)), ("8.0.1-rc1", (8, 0, 1))])
def test_version_tuple(text: str, expected: tuple[int, ...]) -> None:
    assert version_tuple(text) == expected
