"""OpenTelemetry metrics of session stores: `pip install 'densekv[otel]'` (opentelemetry-api;
an SDK and an exporter are the application's, as for any OpenTelemetry instrumentation).

    from densekv.integrations.otel import SessionMetrics
    metrics = SessionMetrics()          # the global MeterProvider (or meter_provider=...)
    metrics.observe(store)              # store.observe(...) under the hood; any number of stores

The instruments have the names and attributes of densekv/integrations/prometheus.py's
metrics, without the `_total` suffix Prometheus gives counters (an OpenTelemetry exporter
to Prometheus adds it back), attribute `namespace` on each:

  densekv_session_operations{operation, outcome}    observable counter
  densekv_session_operation_seconds{operation}      histogram, unit s (recorded per call)
  densekv_session_errors{error}                     observable counter
  densekv_sessions_created                          observable counter
  densekv_sessions_rotated{cause}                   observable counter
  densekv_sessions_destroyed{cause}                 observable counter
  densekv_sessions_expired{cause, found_by}         observable counter
  densekv_session_payload_bytes                     histogram, unit By (recorded per payload)
  densekv_session_read_split_ratio                  observable gauge
  densekv_session_read_out_of_line_ratio            observable gauge
  densekv_sessions_active{method, estimated}        observable gauge (observe(store, active_every=N))
  densekv_sessions_active_refresh_seconds{method}   observable gauge
  densekv_sessions_active_age_seconds               observable gauge
  densekv_sessions_stored_split                     observable gauge (observe(store, stats=True))
  densekv_sessions_stored_out_of_line               observable gauge

Counters are kept by session_tally.Tally (a dict update per call) and read by the SDK when
it collects; the two histograms are recorded per call and per payload, the OpenTelemetry
API's only way in (so this costs more per call than the Prometheus observer: the SDK's
record path, 21-50 us a session call on the dev machine; see docs/metrics.md). `SessionMetrics(histograms=False)`
records none: the two histograms give way to counters the SDK reads when it collects, as
the others (mean latency = time / operations; no quantiles):

  densekv_session_operation_time{operation}         observable counter, unit s
  densekv_session_payloads_written                  observable counter
  densekv_session_payload_bytes_written             observable counter, unit By
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import CallbackOptions, Histogram, Meter, MeterProvider, Observation

from densekv.integrations.session_tally import NAMES, Active, Tally, namespace_of, retire

__all__ = ["INSTRUMENT_NAMES", "NO_HISTOGRAM_NAMES", "SessionMetrics"]

INSTRUMENT_NAMES = NAMES  # the same names as prometheus.py's (session_tally.NAMES)
#: SessionMetrics(histograms=False): the histograms' names give way to these counters
NO_HISTOGRAM_NAMES = (
    *(n for n in NAMES if n not in ("densekv_session_operation_seconds", "densekv_session_payload_bytes")),
    "densekv_session_operation_time", "densekv_session_payloads_written",
    "densekv_session_payload_bytes_written",
)


class _OtelTally(Tally):
    """A Tally that also records the two histograms (the API has no pre-aggregated way)."""

    def __init__(self, namespace: str, latency: Histogram, sizes: Histogram) -> None:
        super().__init__(namespace)
        self.latency_histogram, self.size_histogram = latency, sizes
        self.attrs: dict[str, dict[str, str]] = {}  # operation -> its attributes, made once
        self.ns_attrs = {"namespace": namespace}

    def on_operation(self, name: str, seconds: float, error: str | None) -> None:
        super().on_operation(name, seconds, error)
        attrs = self.attrs.get(name)
        if attrs is None:
            attrs = self.attrs[name] = {"namespace": self.namespace, "operation": name}
        self.latency_histogram.record(seconds, attrs)

    def on_payloads(self, sizes: list[int]) -> None:
        super().on_payloads(sizes)
        for n in sizes:
            self.size_histogram.record(n, self.ns_attrs)


class SessionMetrics:
    """OpenTelemetry instruments for the stores it observes (see the module docstring)."""

    def __init__(self, meter_provider: MeterProvider | None = None, *, histograms: bool = True) -> None:
        """`histograms=False`: no value recorded per call (see the module docstring)."""
        provider = meter_provider or otel_metrics.get_meter_provider()
        meter: Meter = provider.get_meter("densekv", _version())
        self.tallies: list[Tally] = []  # _OtelTally (or Tally without histograms), retired ones
        self.histograms = histograms
        if histograms:
            self.latency: Histogram | None = meter.create_histogram(
                "densekv_session_operation_seconds", unit="s",
                description="Wall time of session store calls (round trips included)")
            self.sizes: Histogram | None = meter.create_histogram(
                "densekv_session_payload_bytes", unit="By",
                description="Session payloads encoded to store, bytes after compression")
        else:
            self.latency = self.sizes = None
            meter.create_observable_counter(
                "densekv_session_operation_time", [self._time], unit="s",
                description="Wall time of session store calls summed (round trips included)")
            meter.create_observable_counter(
                "densekv_session_payloads_written", [self._payloads(count=True)],
                description="Session payloads encoded to store")
            meter.create_observable_counter(
                "densekv_session_payload_bytes_written", [self._payloads(count=False)], unit="By",
                description="Session payloads encoded to store, bytes after compression, summed")
        counters: list[tuple[str, str, Callable[[CallbackOptions], Iterable[Observation]]]] = [
            ("densekv_session_operations", "Session store calls by operation and outcome", self._ops),
            ("densekv_session_errors", "Failed session store calls by exception type", self._errors),
            ("densekv_sessions_created", "Sessions created", self._events("created")),
            ("densekv_sessions_rotated", "Sessions given a new token (login, regenerate)",
             self._events("rotated")),
            ("densekv_sessions_destroyed", "Live sessions removed, by cause", self._events("destroyed")),
            ("densekv_sessions_expired", "Expired sessions removed by this process", self._events("expired")),
        ]
        for name, what, callback in counters:
            meter.create_observable_counter(name, [callback], description=what)
        gauges: list[tuple[str, str, str, Callable[[CallbackOptions], Iterable[Observation]]]] = [
            ("densekv_session_read_split_ratio", "1", "Share of recent reads whose payload was split",
             self._share(0)),
            ("densekv_session_read_out_of_line_ratio", "1",
             "Share of recent reads whose payload was out of line", self._share(1)),
            ("densekv_sessions_active", "{session}",
             "Sessions stored (method partition_counts: exact; scan: estimated)", self._active("value")),
            ("densekv_sessions_active_refresh_seconds", "s", "What the last count of the sessions took",
             self._active("refresh_seconds")),
            ("densekv_sessions_active_age_seconds", "s", "Seconds since the sessions were last counted",
             self._active("age")),
            ("densekv_sessions_stored_split", "{session}", "Sessions stored split (stats=True)",
             self._active("split")),
            ("densekv_sessions_stored_out_of_line", "{session}", "Sessions stored out of line (stats=True)",
             self._active("out_of_line")),
        ]
        for name, unit, what, callback in gauges:
            meter.create_observable_gauge(name, [callback], unit=unit, description=what)

    def observe(self, store: Any, *, namespace: str | None = None, active_every: float | None = 60.0,
                stats: bool = False) -> Tally:
        """As densekv.integrations.prometheus.SessionMetrics.observe."""
        ns = namespace_of(store, namespace)
        tally = (_OtelTally(ns, self.latency, self.sizes) if self.latency is not None and self.sizes is not None
                 else Tally(ns))
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

    # -- callbacks: what the SDK reads when it collects -------------------------------------
    def _sum(self, part: str, attrs: Callable[[Any], dict[str, str] | None]) -> list[Observation]:
        totals: dict[tuple[tuple[str, str], ...], int] = {}
        for tally in list(self.tallies):
            for key, n in tally.snapshot()[part].items():
                got = attrs(key)
                if got is not None:
                    k = tuple(sorted({"namespace": tally.namespace, **got}.items()))
                    totals[k] = totals.get(k, 0) + n
        return [Observation(n, dict(k)) for k, n in totals.items()]

    def _time(self, options: CallbackOptions) -> Iterable[Observation]:
        totals: dict[tuple[str, str], float] = {}
        for tally in list(self.tallies):
            for name, row in tally.snapshot()["latency"].items():
                key = (tally.namespace, name)
                totals[key] = totals.get(key, 0.0) + row[-1]
        return [Observation(t, {"namespace": ns, "operation": op}) for (ns, op), t in totals.items()]

    def _payloads(self, count: bool) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            totals: dict[str, float] = {}
            for tally in list(self.tallies):
                row = tally.snapshot()["sizes"]
                totals[tally.namespace] = totals.get(tally.namespace, 0) + (sum(row[:-1]) if count else row[-1])
            return [Observation(int(v), {"namespace": ns}) for ns, v in totals.items()]
        return callback

    def _ops(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._sum("ops", lambda k: {"operation": k[0], "outcome": k[1]})

    def _errors(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._sum("errors", lambda k: {"error": k})

    def _events(self, kind: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def attrs(key: tuple[str, str, str]) -> dict[str, str] | None:
            k, cause, found_by = key
            if k != kind:
                return None
            if kind == "created":
                return {}
            return {"cause": cause, "found_by": found_by} if kind == "expired" else {"cause": cause}

        def callback(options: CallbackOptions) -> Iterable[Observation]:
            found = self._sum("events", attrs)
            if kind == "created":  # a zero for every namespace observed, as Prometheus shows it
                seen = {o.attributes.get("namespace") for o in found if o.attributes}
                found += [Observation(0, {"namespace": t.namespace}) for t in self.tallies
                          if t.namespace not in seen]
            return found
        return callback

    def _share(self, which: int) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            by_ns: dict[str, list[float]] = {}
            for tally in list(self.tallies):
                share = tally.read_shares()
                if share is not None:
                    by_ns.setdefault(tally.namespace, []).append(share[which])
            return [Observation(sum(v) / len(v), {"namespace": ns}) for ns, v in by_ns.items()]
        return callback

    def _active(self, what: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            latest: dict[str, Active] = {}
            for tally in list(self.tallies):
                active = tally.active
                if active is None:
                    continue
                if what == "value" and active.due():
                    active.kick()  # a sync store counts here, if due; an async one starts a task
                if active.value is None or active.refreshed_at is None:
                    continue
                have = latest.get(tally.namespace)
                if have is None or (have.refreshed_at or 0.0) < active.refreshed_at:
                    latest[tally.namespace] = active
            out = []
            for ns, a in latest.items():
                if what == "value":
                    out.append(Observation(a.value or 0, {"namespace": ns, "method": a.method,
                                                          "estimated": "true" if a.estimated else "false"}))
                elif what == "refresh_seconds":
                    out.append(Observation(a.refresh_seconds or 0.0, {"namespace": ns, "method": a.method}))
                elif what == "age":
                    out.append(Observation(time.monotonic() - (a.refreshed_at or 0.0), {"namespace": ns}))
                else:
                    value = a.split if what == "split" else a.out_of_line
                    if value is not None:
                        out.append(Observation(value, {"namespace": ns}))
            return out
        return callback


def _version() -> str | None:
    """densekv's installed version (its metadata: the runtime never imports the package's face)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("densekv")
    except PackageNotFoundError:
        return None
