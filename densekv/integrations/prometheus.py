"""Prometheus metrics of session stores: `pip install 'densekv[prometheus]'` (prometheus_client).

    from densekv.integrations.prometheus import SessionMetrics
    metrics = SessionMetrics()          # registers with prometheus_client.REGISTRY
    metrics.observe(store)              # store.observe(...) under the hood; any number of stores

Then expose the registry as usual (prometheus_client.start_http_server, make_wsgi_app,
make_asgi_app, generate_latest). Where each framework's store is: docs/metrics.md.

Metrics (label `namespace` on every one: the store's):

  densekv_session_operations_total{operation, outcome}  store calls, outcome "ok" or the
                                                          exception's type name
  densekv_session_operation_seconds{operation}          histogram of their wall time
  densekv_session_errors_total{error}                   failed calls by exception type
  densekv_sessions_created_total                        lifecycle events (events.py)
  densekv_sessions_rotated_total{cause}                 login, regenerate
  densekv_sessions_destroyed_total{cause}               logout, logout_everywhere, limit, admin
  densekv_sessions_expired_total{cause, found_by}       idle / absolute; sweep / destroy
  densekv_session_payload_bytes                         histogram of the payloads encoded to
                                                          store (bytes after compression)
  densekv_session_read_split_ratio                      share of recent reads (moving average,
  densekv_session_read_out_of_line_ratio                  weight 0.05) whose payload was split /
                                                          out of line: no server call
  densekv_sessions_active{method, estimated}            sessions stored (observe(store,
                                                          active_every=N): counted at most every
                                                          N s, see session_tally.Active for costs)
  densekv_sessions_active_refresh_seconds{method}       what the last count took
  densekv_sessions_active_age_seconds                   how old the count is
  densekv_sessions_stored_split / _stored_out_of_line   sessions stored split / out of line
                                                          (observe(store, stats=True): a SCAN)

Per operation the observer updates a few dict entries under a lock (session_tally.Tally);
the metric families are built when scraped, so no prometheus_client object is touched on
the request's way. Several stores of one namespace (one per event loop, as the Starlette
and aiohttp integrations make) are summed into one series.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

from prometheus_client.core import (
    REGISTRY,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString as _go_float

from densekv.integrations.session_tally import (
    LATENCY_BUCKETS,
    NAMES,
    SIZE_BUCKETS,
    Active,
    Tally,
    cumulative,
    namespace_of,
    retire,
)

__all__ = ["METRIC_NAMES", "SessionMetrics"]

#: every metric family this module exports (the names a dashboard may use, without the
#: _total / _bucket / _sum / _count suffixes of the exposition)
METRIC_NAMES = NAMES

_DEFAULT: Any = object()
float_to_go = cast(Callable[[float], str], _go_float)  # the exposition's "le" text (untyped upstream)


def _add(into: dict[Any, Any], key: Any, value: Any) -> None:
    if isinstance(value, list):
        have = into.get(key)
        into[key] = list(value) if have is None else [a + b for a, b in zip(have, value)]
    else:
        into[key] = into.get(key, 0) + value


class SessionMetrics(Collector):
    """A prometheus_client collector of the stores it observes (see the module docstring).
    `registry`: where to register (default prometheus_client.REGISTRY; None: not registered,
    register it yourself)."""

    def __init__(self, registry: CollectorRegistry | None = _DEFAULT) -> None:
        self.tallies: list[Tally] = []
        if registry is _DEFAULT:
            registry = REGISTRY
        if registry is not None:
            registry.register(self)

    def observe(self, store: Any, *, namespace: str | None = None, active_every: float | None = 60.0,
                stats: bool = False) -> Tally:
        """Count `store`'s operations, events and payloads from now on (store.observe). With
        `active_every`, also its sessions (`densekv_sessions_active`), counted at most every
        that many seconds (a sync store when scraped, an async one by a task on the running
        loop: call this from it); `stats=True`: with store.stats(), which adds the sessions
        stored split / out of line, at the cost of a SCAN of the database. `namespace`: the
        label, default the store's (an AsyncSessionStore not yet ready needs it given)."""
        tally = Tally(namespace_of(store, namespace))
        tally.watch(store, active_every, stats)
        store.observe(tally)
        self.tallies.append(tally)
        return tally

    def unobserve(self, store: Any) -> None:
        """Stop counting `store`; what it counted leaves the export with it."""
        for tally in [t for t in self.tallies if t.store is store]:
            store.unobserve(tally)
            self.tallies.remove(tally)

    def retire(self, store: Any) -> None:
        """Stop counting `store` and keep what it counted in the export (its counters never
        fall): for a store whose event loop has closed (session_tally.retire)."""
        retire(self.tallies, store)

    def describe(self) -> Iterable[Metric]:
        return []  # families are made per scrape; the registry then checks nothing up front

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, dict[str, Any]] = {}
        actives: dict[str, list[Active]] = {}
        shares: dict[str, list[tuple[float, float]]] = {}
        for tally in list(self.tallies):
            if tally.active is not None:
                if not tally.active.is_async or tally.active.due():
                    tally.active.kick()  # a sync store counts here, if due; an async one starts a task
                actives.setdefault(tally.namespace, []).append(tally.active)
            share = tally.read_shares()
            if share is not None:
                shares.setdefault(tally.namespace, []).append(share)
            snap = tally.snapshot()
            into = merged.setdefault(tally.namespace, {"ops": {}, "errors": {}, "events": {},
                                                       "latency": {}, "sizes": [0] * (len(SIZE_BUCKETS) + 2)})
            for part in ("ops", "errors", "events", "latency"):
                for key, value in snap[part].items():
                    _add(into[part], key, value)
            into["sizes"] = [a + b for a, b in zip(into["sizes"], snap["sizes"])]
        yield from _families(merged, actives, shares)


def _buckets(row: list[float], bounds: tuple[float, ...]) -> tuple[list[tuple[str, float]], float]:
    pairs, total, _ = cumulative(row, bounds)
    return [(float_to_go(b), n) for b, n in pairs], total


def _families(merged: dict[str, dict[str, Any]], actives: dict[str, list[Active]],
              shares: dict[str, list[tuple[float, float]]]) -> Iterator[Metric]:
    ops = CounterMetricFamily("densekv_session_operations", "Session store calls by operation and "
                              "outcome (ok, or the exception's type name)",
                              labels=["namespace", "operation", "outcome"])
    latency = HistogramMetricFamily("densekv_session_operation_seconds", "Wall time of session "
                                    "store calls (round trips included)", labels=["namespace", "operation"],
                                    unit="seconds")
    errors = CounterMetricFamily("densekv_session_errors", "Failed session store calls by exception type",
                                 labels=["namespace", "error"])
    created = CounterMetricFamily("densekv_sessions_created", "Sessions created", labels=["namespace"])
    rotated = CounterMetricFamily("densekv_sessions_rotated", "Sessions given a new token (login, "
                                  "regenerate)", labels=["namespace", "cause"])
    destroyed = CounterMetricFamily("densekv_sessions_destroyed", "Live sessions removed, by cause",
                                    labels=["namespace", "cause"])
    expired = CounterMetricFamily("densekv_sessions_expired", "Expired sessions removed by this process "
                                  "(cause idle / absolute; found by sweep / destroy)",
                                  labels=["namespace", "cause", "found_by"])
    sizes = HistogramMetricFamily("densekv_session_payload_bytes", "Session payloads encoded to store, "
                                  "bytes after compression", labels=["namespace"], unit="bytes")
    for ns, m in merged.items():
        for (op, outcome), n in sorted(m["ops"].items()):
            ops.add_metric([ns, op, outcome], n)
        for op, row in sorted(m["latency"].items()):
            buckets, total = _buckets(row, LATENCY_BUCKETS)
            latency.add_metric([ns, op], buckets, total)
        for error, n in sorted(m["errors"].items()):
            errors.add_metric([ns, error], n)
        by_kind: dict[str, dict[tuple[str, ...], int]] = {}
        for (kind, cause, found_by), n in m["events"].items():
            key: tuple[str, ...] = (cause, found_by) if kind == "expired" else (cause,)
            _add(by_kind.setdefault(kind, {}), key, n)
        created.add_metric([ns], sum(by_kind.get("created", {}).values()))
        for family, kind in ((rotated, "rotated"), (destroyed, "destroyed"), (expired, "expired")):
            for key, n in sorted(by_kind.get(kind, {}).items()):
                family.add_metric([ns, *key], n)
        buckets, total = _buckets(m["sizes"], SIZE_BUCKETS)
        sizes.add_metric([ns], buckets, total)
    yield from (ops, latency, errors, created, rotated, destroyed, expired, sizes)
    split = GaugeMetricFamily("densekv_session_read_split_ratio", "Share of this process's recent "
                              "session reads whose payload was split (moving average)", labels=["namespace"])
    ool = GaugeMetricFamily("densekv_session_read_out_of_line_ratio", "Share of this process's recent "
                            "session reads whose payload was out of line (moving average)", labels=["namespace"])
    for ns, got in shares.items():
        split.add_metric([ns], sum(s for s, _ in got) / len(got))
        ool.add_metric([ns], sum(o for _, o in got) / len(got))
    yield from (split, ool)
    active = GaugeMetricFamily("densekv_sessions_active", "Sessions stored (partition_counts: exact, "
                               "expired-but-unswept included; scan: estimated)",
                               labels=["namespace", "method", "estimated"])
    cost = GaugeMetricFamily("densekv_sessions_active_refresh_seconds", "What the last count of the "
                             "sessions took", labels=["namespace", "method"])
    age = GaugeMetricFamily("densekv_sessions_active_age_seconds", "Seconds since the sessions were "
                            "last counted", labels=["namespace"])
    stored_split = GaugeMetricFamily("densekv_sessions_stored_split", "Sessions stored with a split "
                                     "payload (store.stats(): a SCAN)", labels=["namespace"])
    stored_ool = GaugeMetricFamily("densekv_sessions_stored_out_of_line", "Sessions stored with an "
                                   "out-of-line payload (store.stats(): a SCAN)", labels=["namespace"])
    for ns, found in actives.items():
        counted = [a for a in found if a.value is not None and a.refreshed_at is not None]
        if not counted:
            continue
        last = max(counted, key=lambda a: a.refreshed_at or 0.0)
        active.add_metric([ns, last.method, "true" if last.estimated else "false"], last.value or 0)
        cost.add_metric([ns, last.method], last.refresh_seconds or 0.0)
        age.add_metric([ns], time.monotonic() - (last.refreshed_at or 0.0))
        if last.split is not None:
            stored_split.add_metric([ns], last.split)
        if last.out_of_line is not None:
            stored_ool.add_metric([ns], last.out_of_line)
    yield from (active, cost, age, stored_split, stored_ool)
