"""The planner's pure parts: listpack pricing, the model fit and prediction, the cache,
input checks. No server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from densekv.errors import PlannerError
from densekv.tools.planner import cache
from densekv.tools.planner.core import check_input
from densekv.tools.planner.listpack import HEADER, allocated, as_int64, entry_size
from densekv.tools.planner.model import (
    Calibration,
    Container,
    Reading,
    Structure,
    calibrate,
    fills,
    fit,
    partition_bytes,
    poisson,
    predict_total,
)


@pytest.mark.parametrize(
    ("data", "size"),
    [
        (b"0", 2), (b"127", 2), (b"128", 3), (b"-1", 3), (b"4095", 3), (b"-4096", 3), (b"4096", 4),
        (b"32767", 4), (b"32768", 5), (b"8388607", 5), (b"8388608", 6), (b"2147483647", 6),
        (b"2147483648", 10), (b"9223372036854775807", 10),
        (b"", 2), (b"a", 3), (b"007", 5), (b"+1", 4), (b"-0", 4), (b"1.5", 5),
        (bytes(15), 17), (bytes(63), 65), (bytes(64), 67), (bytes(200), 204),
        (b"9223372036854775808", 21),  # past int64: a string
    ],
)
def test_entry_size(data: bytes, size: int) -> None:
    assert entry_size(data) == size


def test_as_int64_is_canonical_only() -> None:
    assert as_int64(b"-12") == -12
    assert as_int64(b"012") is None and as_int64(b" 1") is None and as_int64(b"1 ") is None


def test_allocated_rounds_up_to_size_classes() -> None:
    assert allocated(6955, "jemalloc-5.3.0") == 7168
    assert allocated(100, "jemalloc-5.3.0") == 112
    assert allocated(100, "libc") == 104
    for size in (1, 17, 300, 5000, 70000):
        assert allocated(size, "jemalloc") >= size and allocated(size, "libc") >= size


def _containers(fill: list[int], per_item: int, encoding: str = "listpack") -> tuple[Container, ...]:
    return tuple(Container("hash", encoding, k, k * per_item) for k in fill)


def _reading(fill: list[int], per_item: int, k_cost: float, x: float, allocator: str) -> Reading:
    cs = _containers(fill, per_item)
    delta = sum(k_cost + c.modelled(allocator) for c in cs) + x * sum(fill)
    return Reading(sum(fill), round(delta), cs)


@pytest.mark.parametrize(("k_cost", "x"), [(75.0, 0.0), (48.0, 1.5), (120.0, 9.25)])
@pytest.mark.parametrize("allocator", ["jemalloc-5.3.0", "libc"])
def test_fit_recovers_key_and_item_costs(k_cost: float, x: float, allocator: str) -> None:
    half = [50, 61, 47, 55]
    full = [101, 118, 96, 110]
    got_k, got_x = fit([_reading(half, 28, k_cost, x, allocator), _reading(full, 28, k_cost, x, allocator)], allocator)
    assert got_k == pytest.approx(k_cost, abs=0.5)
    assert got_x == pytest.approx(x, abs=0.01)


def test_fit_with_one_item_per_key_folds_everything_into_items() -> None:
    readings = [Reading(10, 1000, _containers([1] * 10, 0, "hashtable")),
                Reading(20, 2000, _containers([1] * 20, 0, "hashtable"))]
    assert fit(readings, "libc") == (0.0, pytest.approx(100.0))


def test_fit_needs_items() -> None:
    with pytest.raises(ValueError):
        fit([], "libc")


def _cal(per_key: float, per_item: float, structures: tuple[Structure, ...], allocator: str = "jemalloc") -> Calibration:
    return Calibration("k", "dense", allocator, per_key, per_item, structures, 0, 0, (), {}, "test", 0.0)


def test_partition_bytes_prices_every_structure() -> None:
    cal = _cal(70.0, 0.0, (Structure("hash", "listpack", 28.0), Structure("zset", "listpack", 17.0)))
    assert partition_bytes(cal, 0) == 0
    assert partition_bytes(cal, 100) == 140 + allocated(HEADER + 2800, "jemalloc") + allocated(HEADER + 1700, "jemalloc")
    other = _cal(70.0, 0.0, (Structure("hash", "hashtable", 0.0),))
    assert partition_bytes(other, 100) == 70


def test_predict_even_fill_is_exact_arithmetic() -> None:
    cal = _cal(50.0, 2.0, (Structure("hash", "listpack", 8.0),))
    # 1000 items in 8 buckets: 125 each
    expected = 8 * (50 + allocated(HEADER + 1000, "jemalloc")) + 1000 * 2.0
    assert predict_total(cal, 1000, 8, "even") == pytest.approx(expected)
    assert predict_total(cal, 0, 8, "even") == 0


def test_predict_matches_a_sample_it_was_fitted_on() -> None:
    """Fit on readings made by the model itself, predict the same fill: the same bytes."""
    fill = [125] * 16
    r1 = _reading([62] * 16, 8, 50.0, 0.0, "jemalloc")
    r2 = _reading(fill, 8, 50.0, 0.0, "jemalloc")
    cal = calibrate("k", "buckets", [r1, r2], allocator="jemalloc", partitions=16, server={},
                    measured_on="test", created_at=0.0)
    assert predict_total(cal, 2000, 16, "even") == pytest.approx(r2.delta, rel=1e-4)
    assert cal.structures == (Structure("hash", "listpack", 8.0),)


def test_items_of_two_fields_are_priced_per_item() -> None:
    """A split session is two hash fields (its record and its continuation field): the
    listpack bytes per item are per session, not per field, so the prediction at the
    sample's fill is the sample's bytes (issue 32: per field, -40% on Flask-Login)."""
    fill = [125] * 16  # sessions per partition; each partition holds 2 x 125 fields
    cs = tuple(Container("hash", "listpack", 2 * k, k * 60) for k in fill)  # 60 B of entries a session
    full = Reading(sum(fill), round(sum(50.0 + c.modelled("libc") for c in cs)), cs)
    cs_half = tuple(Container("hash", "listpack", 2 * 62, 62 * 60) for _ in fill)
    half = Reading(62 * 16, round(sum(50.0 + c.modelled("libc") for c in cs_half)), cs_half)
    cal = calibrate("k", "dense", [half, full], allocator="libc", partitions=16, server={},
                    measured_on="test", created_at=0.0)
    assert cal.structures == (Structure("hash", "listpack", 60.0),)
    assert predict_total(cal, 2000, 16, "even") == pytest.approx(full.delta, rel=1e-3)


@given(st.floats(min_value=0.5, max_value=600))
@settings(max_examples=50, deadline=None)
def test_poisson_is_a_distribution_around_its_mean(mean: float) -> None:
    pmf = poisson(mean)
    assert sum(p for _, p in pmf) == pytest.approx(1.0, abs=1e-9)
    assert sum(k * p for k, p in pmf) == pytest.approx(mean, rel=1e-6)


def test_fills() -> None:
    assert fills(10, 4, "even") == [(2, 0.5), (3, 0.5)]
    assert fills(12, 4, "even") == [(3, 1.0)]
    with pytest.raises(ValueError):
        fills(10, 4, "zipf")
    with pytest.raises(ValueError):
        fills(10, 0, "even")


def test_calibration_round_trips_through_json() -> None:
    cal = _cal(70.5, 0.25, (Structure("hash", "listpack", 28.0),))
    again = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert again == cal


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DENSEKV_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "densekv"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == Path.home() / ".cache" / "densekv"
    monkeypatch.setenv("DENSEKV_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


def test_cache_stores_loads_and_survives_a_corrupt_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DENSEKV_CACHE_DIR", str(tmp_path))
    server = {"flavor": "valkey", "version": "9.1.2", "allocator": "libc", "listpack": {"hash_max_listpack_entries": 512}}
    key = cache.cache_key(server, "dense", {"field": 15})
    assert key != cache.cache_key({**server, "version": "8.0.1"}, "dense", {"field": 15})
    assert key != cache.cache_key(server, "dense", {"field": 14})
    assert cache.load(key) is None
    cal = Calibration(key, "dense", "libc", 46.8, 0.0, (Structure("hash", "listpack", 28.0),), 100, 4, (),
                      server, "test", 1.0)
    cache.store(cal)
    got = cache.load(key)
    assert got is not None and got.cached and got.per_key == 46.8
    (tmp_path / cache.FILE).write_text("{not json")
    assert cache.load(key) is None
    cache.store(cal)  # rewrites the file
    assert cache.load(key) is not None


@pytest.mark.parametrize(
    ("kind", "items", "payload", "ttl", "words"),
    [
        ("queue", 10, 0, False, "unknown kind"),
        ("sessions", 0, 0, False, "items"),
        ("sessions", True, 0, False, "items"),
        ("sessions", 1.5, 0, False, "items"),
        ("sessions", 10, -1, False, "payload"),
        ("set", 10, 0, True, "no per-item expiry"),
        ("set", 10, 65, False, "item size"),
        ("sessions", 10, 70_000, False, "at most"),
    ],
)
def test_bad_input_is_refused_before_any_server(kind: str, items: object, payload: int, ttl: bool, words: str) -> None:
    with pytest.raises(PlannerError, match=words):
        check_input(kind, items, payload, ttl)
