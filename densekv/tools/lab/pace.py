"""How fast this machine runs the lab's kind of work right now: the pace the budgets use.

The default lab must measure the same configurations on an idle laptop and on a CI
runner shared with other jobs, within about the same wall time. Experiments do not drop
configurations when they run slow; they size their work (N, checkpoints, repetitions)
before they start, from their cost on the reference machine (an idle 2-core machine:
seconds = fixed + per item x N, the constants beside each experiment) times the pace.

The probe is the lab's work in miniature: pipelined round trips of small writes from
redis-py (client CPU: building commands, parsing replies), the server's own work on
them, and a short Lua loop (server CPU), on keys of the lab's own (`PROBE_KEYS`, deleted
after). pace = median of three probe timings / the probe's time on the reference
machine, to the power PACE_EXPONENT: 1.0 there, less than 1 on a faster machine. The
probe is all round trips, and a round trip waits for the scheduler on a busy machine,
while the lab also sleeps (the meter's quiet windows) and sends bigger batches: with two
CPU hogs beside it on 2 cores the probe slowed 2.3-2.8x where the experiments slowed
1.4-1.9x, and the exponent maps the one onto the other.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

#: seconds the probe takes on the reference machine (idle 2-core x86-64, valkey 9.1,
#: Python 3.11): the fastest of 40 probes, benchmarks/lab_duration.py prints it
PROBE_REFERENCE_S = 0.050
PROBE_KEYS = 16
PROBE_ROUNDS = 8  # pipelined round trips per probe
PROBE_BATCH = 1000  # commands per round trip
PROBE_LUA = "local n = 0 for i = 1, 200000 do n = n + i % 7 end return n"
PROBE_PREFIX = "densekv-lab:pace:"
PACE_EXPONENT = 0.6


def probe_once(client: Any) -> float:
    """Seconds of one probe (its keys deleted after, outside the timing)."""
    keys = [f"{PROBE_PREFIX}{i}" for i in range(PROBE_KEYS)]
    t0 = time.perf_counter()
    for r in range(PROBE_ROUNDS):
        pipe = client.pipeline(transaction=False)
        for j in range(PROBE_BATCH):
            pipe.hset(keys[j % PROBE_KEYS], f"f{r}:{j}", j)
        pipe.execute()
    client.eval(PROBE_LUA, 0)
    seconds = time.perf_counter() - t0
    client.delete(*keys)
    return seconds


def measure_pace(client: Any, repeats: int = 8) -> float:
    """This machine's pace now: mean probe time / the reference machine's (>= 0.25)."""
    probe_once(client)  # the first one pays for connections and command tables
    seconds = statistics.mean(probe_once(client) for _ in range(repeats))
    pace: float = (seconds / PROBE_REFERENCE_S) ** PACE_EXPONENT
    return max(0.25, round(pace, 2))
