"""The analyzer's pure layers: key patterns, rules, the bounded table, value shapes,
estimates, recommendations and the sample sizing of the replay (no server)."""

from __future__ import annotations

import json
import os
import pickle
import random
import uuid
import zlib
from pathlib import Path

import msgpack
import pytest

from densekv.tools.analyze.estimate import bytes_estimate, keys_estimate
from densekv.tools.analyze.moves import MapMove, id_bytes
from densekv.tools.analyze.patterns import Rules, RulesError, merge_plan, random_looking, tokens_of
from densekv.tools.analyze.recommend import MIN_SAVING, Choice, choose, command_for, final
from densekv.tools.analyze.replay import Copy
from densekv.tools.analyze.scan import RateLimiter
from densekv.tools.analyze.shapes import Shape, safe_unpickle, string_shape
from densekv.tools.analyze.table import (
    MAX_OVERFLOW,
    MAX_PATTERNS,
    RESERVOIR,
    KeyFacts,
    PatternStats,
    PatternTable,
)
from densekv.tools.analyze.wire import ReadOnlyViolation, command_name, roundtrip

U = "0f8fad5b-d9cb-469f-a165-70867728950e"

PATTERNS = [
    (b"session:8qoGuQjP0PmjCBS03Kgw92XtC6kQ_TKZHL_DpX23lyc", "session:{tok}", "session:*"),
    (f"seen:{U}".encode(), "seen:{uuid}", "seen:*"),
    (b"user:1001:visits", "user:{n}:visits", "user:*:visits"),
    (b"user:-5", "user:{n}", "user:*"),
    (b"img77", "img{n}", "img*"),
    (b":1:django.contrib.sessions.cache0a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p",
     ":1:django.contrib.sessions.cache{tok}", ":1:django.contrib.sessions.cache*"),
    (b"starsessions.255ce278fafcc3883bbe3827825828d1", "starsessions.{hex}", "starsessions.*"),
    (f"celery-task-meta-{U}".encode(), "celery-task-meta-{uuid}", "celery-task-meta-*"),
    (f"rq:job:{U}".encode(), "rq:job:{uuid}", "rq:job:*"),
    (b"{user:123}:cart", "{user:{n}}:cart", "{user:*}:cart"),
    (b"stats:2024-06-01T10:00:00Z:hits", "stats:{date}:hits", "stats:*:hits"),
    (b"report:2024-06-01", "report:{date}", "report:*"),
    (b"tok:Zm9vYmFyYmF6cXV4cXV1eA+/abcd==", "tok:{b64}", "tok:*"),
    (b"user_preferences_cache", "user_preferences_cache", "user_preferences_cache"),
    (b"someCamelCaseIdentifier", "someCamelCaseIdentifier", "someCamelCaseIdentifier"),
    (b"order_12345", "order_{n}", "order_*"),
    (b"x:\xff\xfe:1", "x:{bin}:{n}", "x:*:*"),
    (b"a[b]*?:1", "a[b]*?:{n}", "a\\[b\\]\\*\\?:*"),
    (b"cache:views.GET.5d41402abc4b2a76b9719d911017c592.en-us", "cache:views.GET.{hex}.en-us",
     "cache:views.GET.*.en-us"),
]


@pytest.mark.parametrize(("key", "name", "glob"), PATTERNS)
def test_key_patterns(key: bytes, name: str, glob: str) -> None:
    pattern = Rules().pattern(key)
    assert (pattern.name, pattern.glob) == (name, glob)
    assert Rules().name(key) == name


def test_a_long_key_has_a_bounded_pattern() -> None:
    name = Rules().name(b"a:" + b"x" * 5000)
    assert len(name) < 600 and name.endswith("…")


@pytest.mark.parametrize(("text", "random"), [
    ("8qoGuQjP0PmjCBS03Kgw92XtC6kQ", True), ("0a1b2c3d4e5f6g7h8i9j", True), ("someCamelCaseIdentifier", False),
    ("user_preferences_cache", False), ("abcdefghijklmnopqrst", False), ("12345678901234567890", False),
])
def test_random_looking(text: str, random: bool) -> None:
    assert random_looking(text) is random


def test_rules_json_first_match_wins_with_groups(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps([
        {"name": r"cart:\1:{n}", "regex": r"^cart:(eu|us):\d+$", "glob": r"cart:\1:*"},
        {"name": "carts", "regex": r"^cart:"},
    ]))
    rules = Rules.load(path)
    assert (rules.pattern(b"cart:eu:7").name, rules.pattern(b"cart:eu:7").glob) == ("cart:eu:{n}", "cart:eu:*")
    assert (rules.pattern(b"cart:asia:7").name, rules.pattern(b"cart:asia:7").glob) == ("carts", "cart:*")
    assert rules.pattern(b"user:1").name == "user:{n}"  # no rule: automatic


def test_rules_text_format(tmp_path: Path) -> None:
    path = tmp_path / "rules.txt"
    path.write_text("# my keys\nlegacy = ^old_\n\n")
    assert Rules.load(path).pattern(b"old_thing_42").name == "legacy"


@pytest.mark.parametrize(("text", "words"), [
    ("legacy ^old_", "expected NAME = REGEX"), ("x = (unclosed", "bad regex"), ("[{\"name\": 1}]", "needs"),
    ("[not json", "not valid JSON"),
])
def test_bad_rules_files(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "rules"
    path.write_text(text)
    with pytest.raises(RulesError, match=words):
        Rules.load(path)


def test_merge_similar_words() -> None:
    langs = ["en", "fr", "de", "it", "es", "pt", "nl", "pl"]
    merged = merge_plan([tuple(tokens_of(f"cache:{w}:1")) for w in langs])
    assert set(merged) == {f"cache:{w}:{{n}}" for w in langs}
    assert {"".join(t for _, t in v) for v in merged.values()} == {"cache:{w}:{n}"}
    assert merge_plan([tuple(tokens_of(f"cache:{w}:1")) for w in langs[:7]]) == {}


def _facts(key: bytes, kind: str = "string", pttl: int = -1, memory: int = 64) -> KeyFacts:
    return KeyFacts(key, kind, pttl, "embstr", memory)


def test_table_stays_bounded() -> None:
    table = PatternTable()
    for i in range(MAX_PATTERNS + MAX_OVERFLOW + 300):
        for j in range(3):
            table.add(_facts(f"p{chr(97 + i % 26)}x{i}word:{j}".encode()))
    assert len(table) <= MAX_PATTERNS + MAX_OVERFLOW + 1
    assert table.overflow > 0
    assert sum(s.keys for s in table) == 3 * (MAX_PATTERNS + MAX_OVERFLOW + 300)


def test_reservoir_is_bounded_and_uniform() -> None:
    table = PatternTable(seed=5)
    for i in range(20 * RESERVOIR):
        table.add(_facts(f"user:{i}".encode()))
    stats = table.patterns["user:{n}"]
    assert len(stats.reservoir) == RESERVOIR
    ids = sorted(int(k.split(b":")[1]) for _, k in stats.reservoir)
    assert ids[len(ids) // 2] == pytest.approx(10 * RESERVOIR, rel=0.1)  # the median of a uniform sample


def test_table_json_round_trip() -> None:
    table = PatternTable()
    for i in range(50):
        stats = table.add(_facts(f"seen:{uuid.UUID(int=i)}".encode(), pttl=i * 1000))
        stats.add_shape(Shape("integer", 1, small=b"1"), f"seen:{uuid.UUID(int=i)}".encode())
    table.add(_facts(b"\xff\x00bin"))
    back = PatternTable.from_json(json.loads(json.dumps(table.to_json())))
    assert [s.to_json() for s in back] == [s.to_json() for s in table]
    assert back.rng.random() == table.rng.random()


def test_shapes_of_session_formats() -> None:
    flask = msgpack.packb({"_permanent": True, "_user_id": "7", "csrf_token": "ab" * 20})
    assert string_shape(flask, "session:{tok}") == Shape("msgpack-dict", len(flask), session="flask-session")
    django = pickle.dumps({"_auth_user_id": "7", "_auth_user_backend": "django.contrib.auth.backends.ModelBackend"})
    assert string_shape(django, ":1:django.contrib.sessions.cache{tok}").session == "django"
    star = json.dumps({"user": 7, "__metadata__": {"lifetime": 3600}}).encode()
    assert string_shape(star, "starsessions.{hex}").session == "starsessions"
    assert string_shape(b'{"a": 1}', "other:{n}") == Shape("json-dict", 8, session="dict")


@pytest.mark.parametrize(("raw", "kind"), [
    (b"", "empty"), (b"42", "integer"), (b"007", "text"), (U.encode(), "uuid"), (b"deadbeef01", "hex"),
    (b"[1, 2]", "json"), (zlib.compress(b"x" * 100), "compressed"), (b"\x00\x01\xfe", "binary"),
    (pickle.dumps([1, 2]), "pickle"),
])
def test_string_shapes(raw: bytes, kind: str) -> None:
    assert string_shape(raw).kind == kind


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("echo pwned > /dev/null",))


def test_a_pickle_is_never_run() -> None:
    evil = pickle.dumps(_Boom())
    with pytest.raises(pickle.UnpicklingError):
        safe_unpickle(evil)
    assert string_shape(evil).kind == "pickle"
    import datetime

    assert string_shape(pickle.dumps({"when": datetime.datetime(2024, 1, 1)})).kind == "pickle"


def test_keys_estimate_exact_and_sampled() -> None:
    exact = keys_estimate(300, 1000, 1000)
    assert (exact.value, exact.low, exact.high) == (300, 300, 300)
    est = keys_estimate(100, 1000, 1_000_000)
    assert est.low < 100_000 < est.high
    assert keys_estimate(100, 1000, 1_000_000).high - keys_estimate(100, 1000, 1_000_000).low > \
        keys_estimate(1000, 10_000, 1_000_000).high - keys_estimate(1000, 10_000, 1_000_000).low


def test_intervals_cover_the_truth_about_95_percent_of_the_time() -> None:
    rng = random.Random(11)
    population = [(i % 7 == 0, rng.choice([50, 80, 400])) for i in range(20_000)]
    true_keys = sum(1 for p, _ in population if p)
    true_bytes = sum(m for p, m in population if p)
    hits_keys = hits_bytes = 0
    for _ in range(300):
        sample = rng.sample(population, 1000)
        mems = [m for p, m in sample if p]
        k = keys_estimate(len(mems), 1000, len(population))
        b = bytes_estimate(sum(mems), sum(m * m for m in mems), 1000, len(population))
        hits_keys += k.low <= true_keys <= k.high
        hits_bytes += b.low <= true_bytes <= b.high
    assert 0.9 <= hits_keys / 300 <= 0.99
    assert 0.9 <= hits_bytes / 300 <= 0.99


def _stats(name: str, kind: str, n: int = 100, shapes: dict[str, int] | None = None, **extra: object) -> PatternStats:
    rules = Rules()
    pattern = rules.pattern(name.replace("{n}", "1").replace("{uuid}", U).encode())
    stats = PatternStats(pattern.name, pattern.glob, pattern.tokens)
    stats.keys, stats.types = n, {kind: n}
    stats.ttl = {"none": n}
    stats.shapes = shapes or {}
    stats.shape_samples = sum(stats.shapes.values())
    for k, v in extra.items():
        setattr(stats, k, v)
    return stats


@pytest.mark.parametrize(("stats", "kind"), [
    (_stats("session:{n}", "string", shapes={"msgpack-dict": 48}, sessions={"flask-session": 48},
            lengths=48 * 90), "sessions"),
    (_stats("seen:{uuid}", "string", shapes={"integer": 48}, small_values={"1": 48}, id_sizes={"36": 48},
            lengths=48), "set"),
    (_stats("seen:{uuid}", "string", shapes={"integer": 48}, small_values={"1": 48}, id_sizes={"36": 48},
            lengths=48, ttl={"<1d": 100}), "map"),
    (_stats("user:{n}:visits", "string", shapes={"integer": 48}, lengths=96), "map"),
    (_stats("doc:{n}", "string", shapes={"json-dict": 48}, lengths=48 * 600, sessions={}), "map-zstd"),
    (_stats("tags:{n}", "set", shapes={"set": 48}, lengths=48 * 5, member_kinds={"text": 48}), "family"),
    (_stats("ids", "set", n=1, shapes={"set": 1}, lengths=50_000, member_kinds={"uuid": 1},
            member_sizes={"36": 1}), "set-members"),
    (_stats("queue:{n}", "list", shapes={"list": 48}), "leave"),
    (_stats("few:{n}", "string", n=2, shapes={"integer": 2}), "leave"),
])
def test_choose(stats: PatternStats, kind: str) -> None:
    assert choose(stats).kind == kind


def test_mixed_types_are_left() -> None:
    stats = _stats("x:{n}", "string")
    stats.types = {"string": 50, "hash": 50}
    assert choose(stats).kind == "leave" and "mixed" in choose(stats).reason


def test_final_and_commands() -> None:
    stats = _stats("user:{n}:visits", "string", shapes={"integer": 48}, lengths=96)
    choice = choose(stats)
    assert final(choice, MIN_SAVING - 0.01).kind == "leave"
    assert final(choice, MIN_SAVING).kind == "map"
    cmd = command_for(choice, stats, 1234, "redis://h:1/0")
    assert cmd == "densekv migrate --url redis://h:1/0 --namespace user_visits --pattern 'user:*:visits' --expected 1234"
    assert command_for(Choice("leave", "why"), stats, 1, "redis://h:1/0") == "-"


def test_reads_only() -> None:
    assert command_name(("OBJECT", "encoding", b"k")) == "OBJECT ENCODING"
    for cmd in (("SET", b"k", b"v"), ("DEL", b"k"), ("CONFIG", "GET", "*"), ("DEBUG", "OBJECT", b"k"),
                ("OBJECT", "FREQ", b"k"), ("KEYS", "*")):
        with pytest.raises(ReadOnlyViolation):
            roundtrip(None, [cmd])  # type: ignore[arg-type]  # refused before the client is touched


def test_rate_limiter() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    limiter = RateLimiter(500, clock=lambda: now[0], sleep=sleep)
    for _ in range(10):
        limiter.take(100)
    assert sum(slept) == pytest.approx(1.0)  # 1000 commands at 500/s: the first 500 free, then 1 s


@pytest.mark.parametrize(("text", "how", "size", "out"), [
    (U, "uuid", 16, uuid.UUID(U).bytes), ("deadbeef", "hex", 4, bytes.fromhex("deadbeef")),
    ("42", "int", 8, (42).to_bytes(8, "big")), ("-1", "int", 8, None), ("zz", "hex", 1, None),
    ("AAAAAAAAAAAAAAAAAAAAAA", "b64url", 16, bytes(16)),
])
def test_id_bytes(text: str, how: str, size: int, out: bytes | None) -> None:
    assert id_bytes(text, how, size) == out


def test_map_sample_keeps_full_size_quotients() -> None:
    """Numeric keys renumbered into the sample's buckets keep their quotient at full size
    (so their listpack fields are as wide as they will be), and stay distinct."""
    rng = random.Random(3)
    full = 1_000_000
    ids = rng.sample(range(full), 1000)
    copies = [Copy(f"item:{n}".encode(), "string", str(n).encode(), -1, 50) for n in ids]
    stats = _stats("item:{n}", "string", shapes={"integer": 48}, lengths=300)
    move = MapMove(copies, stats, Choice("map", ""), full)
    move.buckets = 9
    out = move.renumbered(512)
    from densekv.maps.buckets import bucket_count, split_numeric

    b_full = bucket_count(full, 512)
    new = [split_numeric(k)[1] for k, _, _ in out]  # type: ignore[index]
    assert len(set(new)) == len(new) == 1000
    before = [n // b_full for n in ids]
    after = [n // 9 for n in new]
    # a quotient moves up only when the sample's few buckets already hold it: the widths
    # of the listpack fields (quotients < 128: 2 bytes) stay what they are at full size
    assert max(after) <= max(before) + 8
    assert sum(after) / len(after) == pytest.approx(sum(before) / len(before), rel=0.05)
