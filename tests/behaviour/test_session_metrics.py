"""Session metrics (issue 34 part 4): densekv.integrations.prometheus and .otel against real
servers, sync and async stores, each value checked after known operations; the active
sessions gauge says how it counted and counts at most once per period; every metric the
Grafana dashboard (docs/grafana-densekv-sessions.json) names is exported after a real run."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
import redis
import redis.asyncio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from densekv.integrations import otel, prometheus
from densekv.integrations.session_tally import Tally
from densekv.sessions import AsyncSessionStore, SessionStore
from densekv.sessions.model import digest_of
from tests.behaviour.test_sessions import Clock, layouts_for

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-densekv-sessions.json"
SWEPT = ("dense", "zset")  # the layouts whose expired sessions a sweep removes (and reports)


def value(reg: prometheus_client.CollectorRegistry, name: str, **labels: str) -> float:
    got = reg.get_sample_value(name, labels)
    return 0.0 if got is None else got


def new_registry() -> tuple[prometheus_client.CollectorRegistry, prometheus.SessionMetrics]:
    reg = prometheus_client.CollectorRegistry()
    return reg, prometheus.SessionMetrics(reg)


def known_operations(store: SessionStore, clock: Clock) -> dict[str, int]:
    """A fixed run; returns how many payloads it stored."""
    tokens = [store.create(i, {"cart": list(range(i))}) for i in range(3)]  # 3 payloads
    assert store.get(tokens[0]) is not None
    logged = store.login(tokens[0], 42)
    assert logged is not None
    assert store.regenerate(logged) is not None
    assert store.destroy(tokens[1])
    a, b = store.create(7), store.create(7)
    assert store.destroy_all(7) == 2 and a and b
    c = store.create(8)
    digest = digest_of(c)
    assert digest is not None and store.destroy_id(digest.hex())
    with pytest.raises(Exception):  # noqa: B017 - data msgpack cannot store: SessionDataInvalid
        store.create(1, {"x": object()})
    store.create(9)  # idle: 100 s without a touch
    store.create(10, ttl=50)  # absolute
    clock.now += 120
    store.sweep()
    return {"payloads": 3}


def test_prometheus_counts_known_operations_on_every_layout(client: redis.Redis) -> None:
    for layout in layouts_for(client):
        clock = Clock()
        ns = f"m-{layout}-{time.time_ns()}"
        store = SessionStore(client, ns, layout=layout, ttl=1000, idle_ttl=100, clock=clock).open()
        reg, metrics = new_registry()
        metrics.observe(store)
        known_operations(store, clock)
        L = {"namespace": ns}
        assert value(reg, "densekv_sessions_created_total", **L) == 8, layout
        assert value(reg, "densekv_sessions_rotated_total", cause="login", **L) == 1
        assert value(reg, "densekv_sessions_rotated_total", cause="regenerate", **L) == 1
        assert value(reg, "densekv_sessions_destroyed_total", cause="logout", **L) == 1
        assert value(reg, "densekv_sessions_destroyed_total", cause="logout_everywhere", **L) == 2
        assert value(reg, "densekv_sessions_destroyed_total", cause="admin", **L) == 1
        # idle: the two sessions left of the first three, and create(9); absolute: create(10,
        # ttl=50); the other layouts' server expires the data itself (nothing to sweep)
        swept = layout in SWEPT
        assert value(reg, "densekv_sessions_expired_total", cause="idle", found_by="sweep", **L) == 3 * swept
        assert value(reg, "densekv_sessions_expired_total", cause="absolute", found_by="sweep", **L) == swept
        assert value(reg, "densekv_session_operations_total", operation="create", outcome="ok", **L) == 8
        assert value(reg, "densekv_session_operations_total", operation="create",
                     outcome="SessionDataInvalid", **L) == 1
        assert value(reg, "densekv_session_errors_total", error="SessionDataInvalid", **L) == 1
        assert value(reg, "densekv_session_operation_seconds_count", operation="create", **L) == 9
        assert value(reg, "densekv_session_operation_seconds_count", operation="destroy", **L) == 1
        assert 0 < value(reg, "densekv_session_operation_seconds_sum", operation="get", **L) < 5
        # the 3 carts; the empty cart {"cart": []} of identity 0 is a payload too
        assert value(reg, "densekv_session_payload_bytes_count", **L) == 3, layout
        assert value(reg, "densekv_session_payload_bytes_sum", **L) > 0
        left = store.count()  # 0 once swept; 4 where the server expires them (on its own clock)
        assert left == (0 if swept else 4)
        method = "partition_counts" if layout in ("dense", "zset", "fieldttl") else "scan"
        estimated = "false" if method == "partition_counts" else "true"
        assert value(reg, "densekv_sessions_active", method=method, estimated=estimated, **L) == left, layout
        assert value(reg, "densekv_sessions_active_refresh_seconds", method=method, **L) > 0
        metrics.unobserve(store)


def test_active_sessions_counted_at_most_once_per_period(client: redis.Redis) -> None:
    ns = f"m-every-{time.time_ns()}"
    store = SessionStore(client, ns, layout="dense").open()
    reg, metrics = new_registry()
    metrics.observe(store, active_every=3600)
    store.create(1)
    for _ in range(3):
        assert value(reg, "densekv_sessions_active", method="partition_counts", estimated="false",
                     namespace=ns) == 1
    assert value(reg, "densekv_session_operations_total", operation="count", outcome="ok", namespace=ns) == 1
    store.create(2)  # not counted again within the hour: the gauge still says 1
    assert value(reg, "densekv_sessions_active", method="partition_counts", estimated="false",
                 namespace=ns) == 1
    metrics.unobserve(store)
    reg2, metrics2 = new_registry()
    metrics2.observe(store, active_every=0, stats=True)
    assert value(reg2, "densekv_sessions_active", method="partition_counts", estimated="false",
                 namespace=ns) == 2
    assert value(reg2, "densekv_sessions_stored_split", namespace=ns) == 0
    assert value(reg2, "densekv_sessions_stored_out_of_line", namespace=ns) == 0


def test_split_and_out_of_line_shares(client: redis.Redis) -> None:
    ns = f"m-split-{time.time_ns()}"
    store = SessionStore(client, ns, layout="dense", auto_train=None).open()
    reg, metrics = new_registry()
    metrics.observe(store, active_every=0, stats=True)
    rng = __import__("random").Random(1)
    big = [store.create(i, {"blob": rng.randbytes(400).hex()}) for i in range(30)]
    for _ in range(3):
        for token in big:
            assert store.get(token) is not None
    split = value(reg, "densekv_session_read_split_ratio", namespace=ns)
    ool = value(reg, "densekv_session_read_out_of_line_ratio", namespace=ns)
    assert split + ool > 0.9  # every read found its payload outside the entry
    stored = value(reg, "densekv_sessions_stored_split", namespace=ns) + \
        value(reg, "densekv_sessions_stored_out_of_line", namespace=ns)
    assert stored == 30
    assert value(reg, "densekv_session_payload_bytes_bucket", le="256.0", namespace=ns) == 0  # ~400 B: compressed hex
    assert value(reg, "densekv_session_payload_bytes_bucket", le="1024.0", namespace=ns) == 30


def test_async_store(server: Any) -> None:
    async def main() -> tuple[dict[str, float], float]:
        client = redis.asyncio.Redis(port=server.port)
        clock = Clock()
        ns = f"m-async-{time.time_ns()}"
        store = AsyncSessionStore(client, ns, layout="dense", ttl=60, clock=clock)
        reg, metrics = new_registry()
        assert store.namespace == ns  # known before the store is open (no server call)
        metrics.observe(store, active_every=3600)  # the first count: a task
        tokens = [await store.create(i, {"n": i}) for i in range(3)]
        assert await store.destroy(tokens[0])
        with pytest.raises(Exception):  # noqa: B017
            await store.create(1, {"x": object()})
        clock.now += 61
        assert await store.sweep() == 2
        L = {"namespace": ns}
        got = {k: value(reg, k, **L) for k in ("densekv_sessions_created_total", "densekv_session_payload_bytes_count")}
        got["logout"] = value(reg, "densekv_sessions_destroyed_total", cause="logout", **L)
        got["expired"] = value(reg, "densekv_sessions_expired_total", cause="absolute", found_by="sweep", **L)
        got["error"] = value(reg, "densekv_session_errors_total", error="SessionDataInvalid", **L)
        tally = metrics.tallies[0]
        assert tally.active is not None
        await tally.active.arefresh()  # count now, whatever the period
        active = value(reg, "densekv_sessions_active", method="partition_counts", estimated="false", **L)
        metrics.unobserve(store)
        await client.aclose()
        return got, active

    got, active = asyncio.run(main())
    assert got == {"densekv_sessions_created_total": 3, "densekv_session_payload_bytes_count": 3,
                   "logout": 1, "expired": 2, "error": 1}
    assert active == 0


def test_async_store_counted_by_a_task_started_when_observed(server: Any) -> None:
    async def main() -> float:
        client = redis.asyncio.Redis(port=server.port)
        store = AsyncSessionStore(client, f"m-task-{time.time_ns()}", layout="json")
        await store.create(1)
        reg, metrics = new_registry()
        metrics.observe(store, active_every=3600)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if metrics.tallies[0].active and metrics.tallies[0].active.value is not None:
                break
        got = value(reg, "densekv_sessions_active", method="scan", estimated="true", namespace=store.namespace)
        await client.aclose()
        return got

    assert asyncio.run(main()) == 1


def otel_points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], float]]]:
    out: dict[str, list[tuple[dict[str, Any], float]]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out[metric.name] = [(dict(p.attributes or {}), getattr(p, "value", None) if hasattr(p, "value")
                                     else p.count) for p in metric.data.data_points]  # type: ignore[union-attr]
    return out


def otel_value(points: dict[str, list[tuple[dict[str, Any], float]]], name: str, **attrs: str) -> float:
    found = [v for a, v in points.get(name, []) if a == attrs]
    assert len(found) <= 1
    return found[0] if found else 0.0


def test_otel_counts_known_operations(client: redis.Redis) -> None:
    reader = InMemoryMetricReader()
    metrics = otel.SessionMetrics(MeterProvider(metric_readers=[reader]))
    clock = Clock()
    ns = f"m-otel-{time.time_ns()}"
    store = SessionStore(client, ns, layout="dense", ttl=1000, idle_ttl=100, clock=clock).open()
    metrics.observe(store)
    known_operations(store, clock)
    p = otel_points(reader)
    assert set(p) <= set(otel.INSTRUMENT_NAMES) and set(otel.INSTRUMENT_NAMES) - set(p) <= {
        "densekv_sessions_stored_split", "densekv_sessions_stored_out_of_line"}  # stats=True only
    L = {"namespace": ns}
    assert otel_value(p, "densekv_sessions_created", **L) == 8
    assert otel_value(p, "densekv_sessions_rotated", cause="login", **L) == 1
    assert otel_value(p, "densekv_sessions_destroyed", cause="logout", **L) == 1
    assert otel_value(p, "densekv_sessions_destroyed", cause="logout_everywhere", **L) == 2
    assert otel_value(p, "densekv_sessions_destroyed", cause="admin", **L) == 1
    assert otel_value(p, "densekv_sessions_expired", cause="idle", found_by="sweep", **L) == 3
    assert otel_value(p, "densekv_session_errors", error="SessionDataInvalid", **L) == 1
    assert otel_value(p, "densekv_session_operations", operation="create", outcome="ok", **L) == 8
    assert otel_value(p, "densekv_session_operation_seconds", operation="create", **L) == 9  # count
    assert otel_value(p, "densekv_session_payload_bytes", **L) == 3
    assert otel_value(p, "densekv_sessions_active", method="partition_counts", estimated="false",
                      **L) == store.count()
    metrics.unobserve(store)


def test_otel_without_histograms_records_nothing_per_call_and_keeps_the_sums(client: redis.Redis) -> None:
    """SessionMetrics(histograms=False): no histogram instrument, none recorded per call;
    the time and the payload bytes come as counters read at collection, equal to the sums
    of the histograms a second SessionMetrics (histograms on) records for the same calls."""
    readers = InMemoryMetricReader(), InMemoryMetricReader()
    plain = otel.SessionMetrics(MeterProvider(metric_readers=[readers[0]]), histograms=False)
    full = otel.SessionMetrics(MeterProvider(metric_readers=[readers[1]]))
    assert plain.latency is None and plain.sizes is None
    clock = Clock()
    ns = f"m-otel-nh-{time.time_ns()}"
    store = SessionStore(client, ns, layout="dense", ttl=1000, idle_ttl=100, clock=clock).open()
    plain.observe(store)
    full.observe(store)
    assert type(plain.tallies[0]) is Tally  # records into no histogram
    known_operations(store, clock)
    p = otel_points(readers[0])
    assert set(p) <= set(otel.NO_HISTOGRAM_NAMES)
    assert not {"densekv_session_operation_seconds", "densekv_session_payload_bytes"} & set(p)
    L = {"namespace": ns}
    assert otel_value(p, "densekv_session_operations", operation="create", outcome="ok", **L) == 8
    assert otel_value(p, "densekv_sessions_created", **L) == 8
    assert otel_value(p, "densekv_session_payloads_written", **L) == 3
    sums: dict[tuple[str, str], float] = {}
    data = readers[1].get_metrics_data()
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:  # type: ignore[union-attr]
                    if hasattr(point, "sum") and not hasattr(point, "value"):
                        sums[(metric.name, str((point.attributes or {}).get("operation", "")))] = point.sum
    assert otel_value(p, "densekv_session_payload_bytes_written", **L) == sums[("densekv_session_payload_bytes", "")] > 0
    for op in ("create", "get", "login", "sweep"):
        took = otel_value(p, "densekv_session_operation_time", operation=op, **L)
        assert took == pytest.approx(sums[("densekv_session_operation_seconds", op)], rel=1e-9) and took > 0
    plain.unobserve(store)
    full.unobserve(store)


def test_on_the_cluster(cluster_client: Any) -> None:
    clock = Clock()
    ns = f"m-cl-{time.time_ns()}"
    store = SessionStore(cluster_client, ns, layout="dense", ttl=60, clock=clock).open()
    reg, metrics = new_registry()
    metrics.observe(store, active_every=0)
    tokens = [store.create(i, {"i": i}) for i in range(20)]
    assert all(store.login(t, i + 100) for i, t in enumerate(tokens[:10]))
    assert value(reg, "densekv_sessions_active", method="partition_counts", estimated="false", namespace=ns) == 20
    clock.now += 61
    store.sweep()
    L = {"namespace": ns}
    assert value(reg, "densekv_sessions_created_total", **L) == 20
    assert value(reg, "densekv_sessions_rotated_total", cause="login", **L) == 10
    assert value(reg, "densekv_sessions_expired_total", cause="absolute", found_by="sweep", **L) == 20
    assert value(reg, "densekv_sessions_active", method="partition_counts", estimated="false", **L) == 0


def test_every_metric_the_dashboard_names_is_exported(client: redis.Redis) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    named = {m for e in exprs for m in re.findall(r"\bdensekv_[a-z_]+", e)}
    assert len(named) >= 10, named
    clock = Clock()
    store = SessionStore(client, f"m-dash-{time.time_ns()}", layout="dense", ttl=1000, idle_ttl=100,
                         clock=clock, auto_train=None).open()
    reg, metrics = new_registry()
    metrics.observe(store, active_every=0, stats=True)
    known_operations(store, clock)
    big = store.create(1, {"blob": "x1" * 300})
    assert store.get(big) is not None
    exposed = {s.name for family in reg.collect() for s in family.samples}
    assert named <= exposed, sorted(named - exposed)
    families = {name for name in prometheus.METRIC_NAMES}
    assert {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in named} <= families
