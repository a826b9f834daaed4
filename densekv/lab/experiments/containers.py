"""Experiment (seed 003): session containers under real HTTP load as stored sessions grow.

A Flask app under gunicorn (one sync worker) per container, the load from wrk at
concurrency 5 (seed 003 used ab -c 5), each request carrying the cookie of a random
session of the load's set; N more sessions stored besides (seed 003's stale sessions),
grown step by step; at each N interleaved rounds of read-only and read-write requests,
the container's bytes per stored session, and at the last N its housekeeping (removing
the N/2 expired) while it serves. The measuring is densekv.lab.containers.harness's;
this module picks the plan and says what was found.

Default run (a time budget): only the containers that need nothing beyond pip and the
lab's server (no memcached, no PostgreSQL), N = 0, N/100 and N/20 of the lab's N, short
loads, 500 sessions in the load's set; on a slow machine (the lab's pace) a smaller
largest N and shorter loads, never fewer containers (Output.trimmed says what). With an
explicit --n (no budget): every container this machine can run, N = 0, N/100, N/10 and
N, longer loads. `densekv (auto)` is measured once when it resolves to
the same store as `densekv dense+index` (it does on every server of the matrix).
Options (tests): containers, ns, requests, rounds, warmup, active.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from densekv.lab.experiments.base import Context, Experiment, FigureSpec, Output, TableSpec
from densekv.lab.results import RunRecord
from densekv.lab.sizing import Sizing

_MISSING = [m for m in ("flask", "gunicorn") if importlib.util.find_spec(m) is None]

#: the sizings of the default run, largest first (Budget.fit picks the first that fits at
#: the machine's pace); `top` is the largest N as a divisor of the lab's N. File creation
#: dominates the fills on the reference machine (~0.7 ms per file on ext4).
QUICK = (
    Sizing(100, {"top": 20, "requests": 200, "rounds": 2, "warmup": 40, "active": 500}),
    Sizing(100, {"top": 40, "requests": 150, "rounds": 2, "warmup": 30, "active": 400},
           "largest N = N/40 instead of N/20, 150 requests per load instead of 200"),
    Sizing(100, {"top": 100, "requests": 100, "rounds": 1, "warmup": 20, "active": 300},
           "largest N = N/100 instead of N/20, one round of 100 requests per load instead of two of 200"),
)
FULL = Sizing(100, {"top": 1, "requests": 1000, "rounds": 3, "warmup": 200, "active": 1000})


def lab_ns(n: int, sizing: Sizing) -> tuple[int, ...]:
    """0, N/100 and the sizing's largest N (N/20 in the full default sizing: 0, 1,000 and
    5,000 at the lab's 100,000); with an explicit --n: 0, N/100, N/10, N."""
    top = n // sizing["top"]
    steps = [0, n // 100, n // 10, n] if sizing["top"] == 1 else [0, min(n // 100, top // 2), top]
    return tuple(sorted(set(steps)))


def cost(sizing: Sizing, n: int, containers: int) -> float:
    """Seconds the sizing takes on the reference machine (idle, 2 cores): app starts and
    the load's own sessions, fills (files dominate), loads (~2,500 req/s, ~15 ms per wrk
    run), housekeeping and the Redis meter's readings."""
    ns = lab_ns(n, sizing)
    loads = len(ns) * containers * (sizing["rounds"] * 2 * sizing["requests"] + 1.5 * sizing["warmup"]) / 2500
    runs = len(ns) * containers * (2 * sizing["rounds"] + 2) * 0.015
    return 4.0 + 1.5e-3 * (max(ns) + sizing["active"]) + loads + runs + 3.0


def redis_url(client: Any) -> str:
    """A URL for the lab's server that the app's own client can open."""
    kw = client.connection_pool.connection_kwargs
    auth = ""
    if kw.get("password"):
        from urllib.parse import quote

        auth = f"{quote(str(kw.get('username') or ''))}:{quote(str(kw['password']))}@"
    return f"redis://{auth}{kw.get('host', '127.0.0.1')}:{kw.get('port', 6379)}/{kw.get('db', 0) or 0}"


def auto_is_dense_index(client: Any) -> bool:
    """Whether SessionStore's defaults pick dense with the identity index here."""
    from densekv import SessionStore

    store = SessionStore(client, namespace="lab-containers-probe")
    return bool(store.layout == "dense" and store.explain()["index_partitions"] is not None)


class Containers(Experiment):
    kind = "containers"
    not_on_cluster = ("its web apps are given one server's redis:// URL (their session backends, Flask-Session "
                      "and the rest, open a plain client), and it meters that one server")
    title = "Session containers under HTTP load as stored sessions grow"
    seed = "003"
    budget_s = 25.0
    available = not _MISSING
    reason = f"not available: needs {' and '.join(_MISSING)} (pip install flask gunicorn)" if _MISSING else ""

    def run(self, ctx: Context) -> Output:
        from densekv.lab.containers.findings import filesystem_of
        from densekv.lab.containers.harness import Plan, run_containers
        from densekv.lab.containers.registry import CONTAINERS, DEFAULT_LAB

        target, opts = ctx.target, ctx.options
        full = ctx.budget.seconds is None
        out = Output(self.kind, target.name)
        names = list(opts.get("containers") or ([c.name for c in CONTAINERS] if full else DEFAULT_LAB))
        once = ""
        target.clear()
        if "densekv" in names and "densekv-dense" in names and auto_is_dense_index(target.client):
            names.remove("densekv-dense")
            once = ("densekv dense+index: measured once, as densekv (auto), which resolves to the dense layout "
                    "with the identity index on this server")
        target.clear()
        sizing = ctx.budget.fit([FULL] if full else list(QUICK), lambda z: cost(z, ctx.n, len(names)))
        out.trimmed = sizing.trimmed
        knobs: dict[str, Any] = {k: sizing[k] for k in ("requests", "warmup", "rounds", "active")}
        knobs.update({k: opts[k] for k in ("requests", "warmup", "rounds", "active") if k in opts})
        plan = Plan(tuple(names), tuple(opts.get("ns") or lab_ns(ctx.n, sizing)), housekeeping="last",
                    sweep_window_s=1.0 if full else 0.2, **knobs)
        rundir = Path(tempfile.mkdtemp(prefix="densekv-containers-"))
        ctx.progress.start(f"{self.kind} on {target.name}", total=len(plan.ns) * plan.rounds)
        started = time.monotonic()

        def progress(message: str) -> None:
            if "round" in message:
                ctx.progress.advance(1)

        def measured(found: dict[str, Any]) -> None:  # each (container, N) as soon as it is done
            record = _record(ctx, found)
            out.records.append(record)
            ctx.progress.record(record)

        try:
            filesystem = filesystem_of(rundir)
            outcome = run_containers(plan, rundir, redis_url=redis_url(target.client), client=target.client,
                                     meter=target.meter, progress=progress, over_budget=ctx.budget.exceeded,
                                     on_record=measured)
        finally:
            shutil.rmtree(rundir, ignore_errors=True)
            target.clear()
        missing = "; ".join(outcome.notes)
        if once or missing:
            out.notes.append("; ".join(t for t in (once, missing) if t) + ".")
        _describe(out, plan, outcome, filesystem, time.monotonic() - started)
        return out


def _record(ctx: Context, r: dict[str, Any]) -> RunRecord:
    """One container at one N."""
    point = {"n": r["n"], "bytes_per_item": r["bytes_per_session"], "ro_rps": r["ro"]["rps"],
             "ro_p50_ms": r["ro"]["p50_ms"], "ro_p99_ms": r["ro"]["p99_ms"], "rw_rps": r["rw"]["rps"],
             "rw_p50_ms": r["rw"]["p50_ms"], "rw_p99_ms": r["rw"]["p99_ms"],
             "misses": r["ro"]["misses"] + r["rw"]["misses"], "errors": r["ro"]["errors"] + r["rw"]["errors"]}
    return RunRecord.stamped(
        ctx.target.stamp, kind="containers", layout=r["container"], partitions=None, variant=r["label"], n=r["n"],
        bytes_per_item=r["bytes_per_session"], op="read", ops_per_s=r["ro"]["rps"], points=[point],
        ops={"read": r["ro"], "write": r["rw"]},
        params={"generator": r["generator"], "profile": r["profile"], "active": r["active"],
                "housekeeping": r["housekeeping"], "densekv_layout": r["layout"]},
    )


def _describe(out: Output, plan: Any, outcome: Any, filesystem: str, seconds: float) -> None:
    from densekv.lab.containers import findings
    from densekv.lab.containers.registry import BY_NAME

    records = outcome.records
    out.method += [
        ("One small Flask app run by gunicorn with one sync worker (so the in-process dict is one store, and "
         "requests per second are the inverse of the time per request), its session container chosen at "
         "start-up by environment variables; every app of the run starts once and stays up."),
        (f"Load: {outcome.generator or 'wrk'} at concurrency {plan.connections} (seed 003: ab -c 5), each "
         f"request carrying the cookie of a random one of {plan.active:,} sessions ({plan.profile} payloads, "
         "densekv.lab.session_profiles); GET /r reads the session, GET /w also writes it. A response that "
         "found no session counts as a miss."),
        "Stored sessions N: besides the load's sessions, grown to N = " + ", ".join(f"{n:,}" for n in plan.ns)
        + "; half of them expire in a day, the rest after 30 days. At each N, "
        f"{plan.rounds} rounds of {plan.requests:,} read-only and {plan.requests:,} read-write requests per "
        "container, the containers in turn (rotating order), after a warm-up; figures are medians over rounds.",
        ("Bytes per stored session: the container's size delta over the sessions added (the load's own "
         "sessions and its writes not counted): RSS of the worker (dict) or of memcached, allocated blocks "
         "on disk (files), database pages including indexes (SQL), used_memory less client buffers (Redis)."),
        ("Housekeeping at the last N: the N/2 sessions that have expired (as of two days later) are removed "
         "while a read-only load runs: age sweep (files), DELETE ... WHERE expires < t (SQL), "
         "SessionStore.sweep() (densekv), a dict scan in the worker."),
        "Containers: " + "; ".join(f"{BY_NAME[r['container']].label}: {BY_NAME[r['container']].what}"
                                   for r in {r['container']: r for r in records}.values()) + ".",
    ]
    if not records:
        return
    rps = findings.rps_findings(records, filesystem) + findings.densekv_findings(records)
    out.figures.append(FigureSpec("rps", "Requests per second against stored sessions",
                                  " ".join(rps), lambda fig: findings.draw_rps(fig, records)))
    top = max(r["n"] for r in records)
    p99 = sorted(((r["ro"]["p99_ms"], r["label"]) for r in records if r["n"] == top), reverse=True)
    dk = {r["container"]: r for r in records if r["n"] == top}
    line = f"p99 latency, read-only, at N = {top:,}: highest {p99[0][0]:.1f} ms ({p99[0][1]})" if p99 else ""
    if "densekv" in dk and "dict" in dk:
        line += (f"; densekv (auto) {dk['densekv']['ro']['p99_ms']:.1f} ms against {dk['dict']['ro']['p99_ms']:.1f} ms "
                 "for the in-process dict")
    out.figures.append(FigureSpec("p99", "p99 latency against stored sessions", line + ".",
                                  lambda fig: findings.draw_p99(fig, records)))
    out.figures.append(FigureSpec("bytes", "Bytes per stored session, by container", findings.bytes_finding(records),
                                  lambda fig: findings.draw_bytes(fig, records)))
    hk = findings.housekeeping_finding(records)
    if hk:
        out.figures.append(FigureSpec("housekeeping", "Housekeeping: removing N/2 expired sessions while serving",
                                      hk, lambda fig: findings.draw_housekeeping(fig, records)))
    out.tables.append(TableSpec(
        "Per container and N", ["container", "N", "read req/s", "read p99 ms", "read CPU µs", "write req/s",
                                "write p99 ms", "write CPU µs", "bytes/session", "misses"],
        [[r["label"], r["n"], r["ro"]["rps"], r["ro"]["p99_ms"], r["ro"]["app_cpu_us"] + r["ro"]["store_cpu_us"],
          r["rw"]["rps"], r["rw"]["p99_ms"], r["rw"]["app_cpu_us"] + r["rw"]["store_cpu_us"],
          r["bytes_per_session"], r["ro"]["misses"] + r["rw"]["misses"]] for r in records],
        f"CPU µs: per request, in the app's worker and the store's own processes (from /proc), which other work "
        f"on the machine moves far less than req/s. Files live on {filesystem}; the experiment took {seconds:.1f} s.",
    ))


EXPERIMENT = Containers()
