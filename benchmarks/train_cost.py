"""What the write that trains a session store's dictionary pays for it.

A store keeps the packed payloads of its first AUTO_TRAIN (2000) writes and, on the write
that brings the 2000th, trains a 4 KB zstd dictionary and the key table from them and
stores them as one (densekv/sessions/payload_flows.py sample). That one request is slower
by the training; this measures the training itself (payload.train_payloads on the packed
payloads of each session profile, as the store does, no server) over several repeats, and prints one JSON
record per profile: median and max milliseconds ("what": "train").

With a dictionary, a store looks at its fit REFIT_FIRST writes after adopting it and then at
doubling gaps (payload_flows.py refit): it trains a candidate on half of its REFIT_SAMPLES
recent payloads and frames the other half with both. "what": "refit_look" times that look
(Payloads.fit and Fit.adopt, no server) on the next REFIT_SAMPLES sessions of the profile, the
dictionary in use trained on the first AUTO_TRAIN (and 100 writes made with it, which probe
the ways: while the key table leads, a look trains only the table again), and says whether
the candidate would be adopted; P1->P1n is the shape change of the end-to-end benchmark (a Django login that gains
the key "n"), where it is.

Usage: python benchmarks/train_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.gitstamp import commit
from densekv.codec import ZstdDictionary
from densekv.sessions.layouts.base import LayoutLimits
from densekv.sessions.layouts.partitioned import DenseLayout
from densekv.sessions.model import Record
from densekv.sessions.payload import DEFAULT_MAX_DATA_BYTES, pack_data, train_payloads
from densekv.sessions.payload_flows import AUTO_TRAIN, REFIT_SAMPLES, Payloads
from densekv.sessions.record import pack_record
from densekv.tools.lab.session_profiles import django_login_written, sessions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    for profile in ("P0", "P1", "P2", "P3"):
        packed = [pack_data(d) for _, d in sessions(profile, AUTO_TRAIN, start=10_000)]
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            train_payloads(packed)
            times.append((time.perf_counter() - t) * 1000)
        print(json.dumps({"bench": "train_cost", "what": "train", "profile": profile, "samples": AUTO_TRAIN,
                          "median_ms": round(statistics.median(times), 1),
                          "max_ms": round(max(times), 1), "commit": commit()}))
    for profile in ("P0", "P1", "P2", "P3", "P1->P1n"):
        refit_look(profile, args.repeats)


def refit_look(profile: str, repeats: int) -> None:
    """Time Payloads.fit as a dense store of 2,048 partitions runs it, under the
    default hash-max-listpack-value (64): no server (module docstring)."""
    first, then = (profile, profile) if "->" not in profile else profile.split("->")
    layout = DenseLayout("sess", 2048, LayoutLimits())
    payloads = Payloads("sess", DEFAULT_MAX_DATA_BYTES, AUTO_TRAIN, lambda: 0)
    trained = train_payloads([pack_data(d) for _, d in sessions(first, AUTO_TRAIN, start=10_000)])
    payloads.codec.use(ZstdDictionary.of(trained))
    for _, data in sessions(first, 100, start=15_000):  # writes probe the ways, as a store's do before a look
        payloads.codec.encode(data)
    recent: list[tuple[bytes | None, bytes, int | None]] = []
    for n in range(20_000, 20_000 + REFIT_SAMPLES):
        identity, data = django_login_written(n) if then == "P1n" else next(sessions(then, 1, start=n))
        recent.append((pack_data(data), b"", len(pack_record(Record(bytes(16), identity, 2**31, 2**31, data, None)))))
    times, fit = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        fit = payloads.fit(layout, recent)
        adopted = fit is not None and fit.adopt()
        times.append((time.perf_counter() - t) * 1000)
    assert fit is not None
    print(json.dumps({"bench": "train_cost", "what": "refit_look", "profile": profile, "samples": len(recent),
                      "adopted": adopted, "median_ms": round(statistics.median(times), 1),
                      "max_ms": round(max(times), 1),
                      # the held half framed with the dictionary in use / the candidate
                      "framed_bytes": [round(fit.bytes_now / fit.held, 2), round(fit.bytes_then / fit.held, 2)],
                      "split_share": [round(fit.split_now / fit.held, 3), round(fit.split_then / fit.held, 3)],
                      "commit": commit()}))


if __name__ == "__main__":
    main()
