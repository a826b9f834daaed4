"""What session metrics add to one store call's client CPU, without the I/O (issue 34).

benchmarks/hot_path.py --observe measures observed against bare calls on a real server, where
the call's own CPU (~30-120 us, with the wait for the reply and the context switches) and the
shared 2-core machine's noise are around the small difference. This measures the difference
alone: `store._run` of a flow that sends nothing (the shell's whole path: the observed branch,
the timing, the delivery to observers), bare, with an observer that does nothing, with
densekv.integrations.prometheus's, with .otel's (SDK MeterProvider, InMemoryMetricReader) and
with .otel's without histograms (`histograms=False`: nothing recorded per call), in turns
(bare, nop, prometheus, otel, otel_no_histograms, repeated --repeat times), each the best of 5 timeit
runs of --number calls: microseconds per call, process CPU (time.process_time).

Prints one JSON record per server and appends it to benchmarks/results/observer_cost.jsonl
(--no-save: print only).

Usage: python benchmarks/observer_cost.py [--server valkey-9.1] [--number 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import timeit
from pathlib import Path
from statistics import median
from typing import Any

import gitstamp
import prometheus_client
import redis
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from records import emit

import densekv
from densekv.integrations import otel, prometheus
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

RESULTS = Path(__file__).parent / "results" / "observer_cost.jsonl"


def nothing(core: Any) -> Any:
    return (yield from ())


class Nop:
    def on_operation(self, name: str, seconds: float, error: str | None) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="valkey-9.1")
    ap.add_argument("--number", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    with ServerProcess(find_servers()[args.server]) as proc:
        store = densekv.SessionStore(redis.Redis.from_url(proc.url), "cost")
        prom = prometheus.SessionMetrics(prometheus_client.CollectorRegistry())
        ot = otel.SessionMetrics(MeterProvider(metric_readers=[InMemoryMetricReader()]))
        ot_nh = otel.SessionMetrics(MeterProvider(metric_readers=[InMemoryMetricReader()]), histograms=False)
        nop = Nop()
        modes = {
            "bare": (lambda: None, lambda: None),
            "nop": (lambda: store.observe(nop), lambda: store.unobserve(nop)),
            "prometheus": (lambda: prom.observe(store, active_every=None), lambda: prom.unobserve(store)),
            "otel": (lambda: ot.observe(store, active_every=None), lambda: ot.unobserve(store)),
            "otel_no_histograms": (lambda: ot_nh.observe(store, active_every=None), lambda: ot_nh.unobserve(store)),
        }
        us: dict[str, list[float]] = {m: [] for m in modes}

        def call() -> Any:
            return store._run(nothing, "get")  # noqa: SLF001 - the shell's path, no I/O

        for _ in range(args.repeat):
            for mode, (on, off) in modes.items():
                on()
                best = min(timeit.repeat(call, number=args.number, repeat=5, timer=__import__("time").process_time))
                us[mode].append(1e6 * best / args.number)
                off()
    med = {m: round(median(v), 3) for m, v in us.items()}
    rec = {"benchmark": "observer_cost", "commit": gitstamp.commit(), "server": args.server,
           "number": args.number, "repeat": args.repeat, "us_per_call": med,
           "us_rounds": {m: [round(x, 3) for x in v] for m, v in us.items()},
           "added_us": {m: round(med[m] - med["bare"], 3) for m in modes if m != "bare"},
           "load_average_1m": round(os.getloadavg()[0], 2)}
    emit(rec, None if args.no_save else RESULTS)


if __name__ == "__main__":
    main()
