"""Bytes per session with the lifecycle features off and on (issue 34): the identity
index in format 0 (every feature off), track_devices with no label and with a 16-byte
label ("Firefox on Linux"), max_sessions_per_identity (format 1 entries, no label), and
events_stream (one stream entry per session created: its bytes less "off"'s are an event's).

One fresh server per (server, variant); N sessions with integer identities 0..N-1 and no
payload, created 5000 per round trip, measured with densekv's Meter at N/10 and N (the
session_memory.py method). The "off" variant is the default store, so its figure is the
one every store without the features pays, before and after this change.
Records: benchmarks/results/session_devices.jsonl (records.emit), one per run.

Usage: python benchmarks/session_devices.py [--n 1000000] [--server NAME ...]
       [--variant off|devices|devices_label|limit|stream ...] [--no-save]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
from records import emit

from densekv.sessions import SessionStore
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

VARIANTS: dict[str, tuple[dict[str, Any], str | None]] = {
    "off": ({}, None),
    "devices": ({"track_devices": True}, None),
    "devices_label": ({"track_devices": True}, "Firefox on Linux"),
    "limit": ({"max_sessions_per_identity": 5}, None),
    # the event stream, uncapped for the load: one "created" entry per session
    "stream": ({"events_stream": 1 << 40}, None),
}
OUT = Path(__file__).parent / "results" / "session_devices.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--server", action="append")
    ap.add_argument("--variant", action="append", choices=list(VARIANTS))
    ap.add_argument("--no-save", action="store_true", help="print only")
    args = ap.parse_args()
    servers = find_servers()
    commit = gitstamp.commit()
    for name in args.server or list(servers):
        for variant in args.variant or list(VARIANTS):
            options, label = VARIANTS[variant]
            with ServerProcess(servers[name]) as proc:
                client = proc.client()
                meter = Meter(client)
                store = SessionStore(client, layout="dense", expected_sessions=args.n, **options)

                def load(start: int, stop: int, store: SessionStore = store, label: str | None = label) -> None:
                    for lo in range(start, stop, 5000):
                        batch = range(lo, min(stop, lo + 5000))
                        store._run(lambda c, b=batch: c.put_records(c.new_records(b, None, None), label=label))  # noqa: SLF001

                t0 = time.perf_counter()
                curve = meter.curve(variant, load, [args.n // 10, args.n])
                load_s = time.perf_counter() - t0
            emit({"benchmark": "session_devices", "commit": commit, "server": name, "version": curve.version,
                  "allocator": curve.allocator, "variant": variant, "options": options, "label": label,
                  "n": args.n, "bytes_per_item": round(curve.final.bytes_per_item, 2),
                  "bytes_per_item_at_n_10": round(curve.points[0].bytes_per_item, 2),
                  "create_per_s": round(args.n / load_s)}, None if args.no_save else OUT)


if __name__ == "__main__":
    main()
