"""Experiment (seed 003): session containers under real HTTP load as stored sessions grow.

A Flask app under gunicorn (one sync worker) per container, the load from wrk at
concurrency 5 (seed 003 used ab -c 5), each request carrying the cookie of a random
session of the load's set; N more sessions stored besides (seed 003's stale sessions),
bulk-loaded step by step to N = 0, N/100, N/10 and N of the lab's N (0, 1,000, 10,000
and 100,000 by default); at each N interleaved rounds of read-only and read-write
requests with the CPU time each request cost (app worker + store processes) beside its
rate, and the container's bytes per stored session; housekeeping (removing the expired
half while serving) at N/10. The seed's verdict per container - falls or flat - comes
from its points (containers.findings.Trend), set beside what the seed found.

Default run (a time budget): only the containers that need nothing beyond pip and the
lab's server (no memcached, no PostgreSQL), every one to the lab's N; short loads (a
load stops after a second, so a container that fell off answers fewer requests, not
slower ones); on a slow machine fewer requests and rounds, never fewer containers or
N steps (Output.trimmed says what). With an explicit --n (no budget): every container
this machine can run, the same four N, longer loads. `densekv (auto)` is measured once
when it resolves to the same store as `densekv dense+index` (it does on every server of
the matrix). Options (tests): containers, ns, requests, rounds, warmup, active.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from densekv.tools.lab.experiments.base import Context, Experiment, FigureSpec, Output, TableSpec
from densekv.tools.lab.results import RunRecord
from densekv.tools.lab.sizing import Sizing

_MISSING = [m for m in ("flask", "gunicorn") if importlib.util.find_spec(m) is None]

#: the sizings of the default run, largest first (Budget.fit picks the first that fits at
#: the machine's pace). Every one measures every default container at the four N of
#: lab_ns (Sizing.n: that count); they trim requests per load and rounds.
QUICK = (
    Sizing(4, {"requests": 200, "rounds": 2, "warmup": 40, "active": 500}),
    Sizing(4, {"requests": 100, "rounds": 2, "warmup": 20, "active": 500},
           "100 requests per load instead of 200"),
    Sizing(4, {"requests": 100, "rounds": 1, "warmup": 20, "active": 300},
           "one round of 100 requests per load instead of two of 200"),
)
FULL = Sizing(4, {"requests": 1000, "rounds": 3, "warmup": 200, "active": 1000})
CEILING_S = {"quick": 1.0, "full": 10.0}  # seconds a load may take at most

#: reference µs per stored session to bulk-load (idle 2-core machine, the run's directory
#: on tmpfs): the payload generation once per run, then each container's own fill and its
#: bytes readings; fitted to default `densekv lab` runs (containers: 37.8 s at pace 1.35
#: with the smallest sizing)
FILL_US = {"payload": 15.0, "none": 0.5, "dict": 9.0, "files-flat": 25.0, "files-hashed": 28.0,
           "sqlite-indexed": 5.0, "sqlite-unindexed": 3.0, "redis-json": 6.0, "densekv": 45.0,
           "densekv-dense": 45.0, "memcached": 6.0, "postgres-indexed": 8.0, "postgres-unindexed": 6.0}
RATE = 1500.0  # reference requests per second of a container that does not fall off
SCAN_US_PER_ROW = 0.04  # an unindexed SQL read at N: about N x this µs more per request


def lab_ns(n: int) -> tuple[int, ...]:
    """0, N/100, N/10 and N: four counts reaching the lab's N (0, 1,000, 10,000 and
    100,000 at the default N), evenly spaced on the figures' log axis."""
    return tuple(sorted({0, n // 100, n // 10, n}))


def cost(sizing: Sizing, n: int, names: list[str] | tuple[str, ...]) -> float:
    """Seconds the sizing takes on the reference machine: app starts, the fills to N,
    the loads (a slow container's capped at the ceiling), housekeeping at N/10, and
    removing the run's files."""
    ns = lab_ns(n)
    loads_per_n = sizing["rounds"] * 2
    requests = sizing["requests"]
    load_s = 0.0
    for name in names:
        for at in ns:
            per_request = 1 / RATE + (SCAN_US_PER_ROW * at / 1e6 if name.endswith("unindexed") else 0.0)
            one = min(CEILING_S["quick"], requests * per_request) + 0.03
            load_s += loads_per_n * one + min(CEILING_S["quick"], 1.5 * sizing["warmup"] * per_request)
    fill_s = n * (FILL_US["payload"] + sum(FILL_US.get(name, 10.0) for name in names)) / 1e6
    files = sum(1 for name in names if name.startswith("files"))
    cleanup_s = n * files * 15e-6 + 0.2 * len(names) + n / 10 * files * 30e-6
    return 5.0 + fill_s + load_s + cleanup_s


#: where the run's directory goes when it has room: a memory file system, not the disk
TMPFS = Path("/dev/shm")
FILE_BYTES = 4096  # a session file takes one block, whatever its 200-600 bytes


def run_parent(n: int, names: list[str] | tuple[str, ...], tmpfs: Path = TMPFS) -> str | None:
    """The directory for the run's files and SQLite databases: TMPFS if it is a tmpfs this
    process can write with room for twice what the run stores, else None (the temp dir).
    Each file container at N = 100,000 is ~400 MB of tiny files: on a disk file system
    that is as many bytes of writes, and deleting files still being written back takes
    minutes on a busy machine; in memory both take seconds. The report names the file
    system either way."""
    from densekv.tools.lab.containers.findings import filesystem_of

    files = sum(1 for name in names if name.startswith(("files", "sqlite")))
    need = 2 * (files * n * FILE_BYTES + (64 << 20))
    try:
        if filesystem_of(tmpfs) != "tmpfs" or not os.access(tmpfs, os.W_OK | os.X_OK):
            return None
        st = os.statvfs(tmpfs)
    except OSError:
        return None
    return str(tmpfs) if st.f_bavail * st.f_frsize >= need else None


RUN_PREFIX = "densekv-containers-"
OWNER = "lab.pid"  # in each run's directory: the lab process that made it


def remove_stale(parent: Path) -> int:
    """Remove the run directories under `parent` whose lab process is gone (a lab killed
    outright leaves its files, possibly in memory on tmpfs); the number removed."""
    removed = 0
    for path in parent.glob(RUN_PREFIX + "*"):
        try:
            pid = int((path / OWNER).read_text())
        except (OSError, ValueError):
            continue  # not ours to judge (no pid file: a run of an older lab, or not a run)
        if pid == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


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

    store = SessionStore(client, namespace="lab-containers-probe").open()
    return bool(store.layout == "dense" and store.explain()["index_partitions"] is not None)


class Containers(Experiment):
    kind = "containers"
    not_on_cluster = ("its web apps are given one server's redis:// URL (their session backends, Flask-Session "
                      "and the rest, open a plain client), and it meters that one server")
    title = "Session containers under HTTP load as stored sessions grow"
    seed = "003"
    budget_s = 50.0
    available = not _MISSING
    reason = f"not available: needs {' and '.join(_MISSING)} (pip install flask gunicorn)" if _MISSING else ""

    def run(self, ctx: Context) -> Output:
        from densekv.tools.lab.containers.findings import filesystem_of
        from densekv.tools.lab.containers.harness import Plan, run_containers
        from densekv.tools.lab.containers.registry import CONTAINERS, DEFAULT_LAB

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
        sizing = ctx.budget.fit([FULL] if full else list(QUICK), lambda z: cost(z, ctx.n, names))
        out.trim(sizing.trimmed)
        knobs: dict[str, Any] = {k: sizing[k] for k in ("requests", "warmup", "rounds", "active")}
        knobs.update({k: opts[k] for k in ("requests", "warmup", "rounds", "active") if k in opts})
        ns = tuple(sorted(set(opts.get("ns") or lab_ns(ctx.n))))
        sweep_at = next((m for m in ns if m >= ctx.n // 10 and m > 0), ns[-1])
        plan = Plan(tuple(names), ns, housekeeping="at", sweep_at=sweep_at,
                    ceiling_s=CEILING_S["full" if full else "quick"],
                    sweep_window_s=1.0 if full else 0.2, **knobs)
        parent = run_parent(ctx.n, names)
        stale = remove_stale(Path(parent or tempfile.gettempdir()))
        if stale:
            out.notes.append(f"removed {stale} run director{'y' if stale == 1 else 'ies'} left by a lab killed "
                             "outright")
        rundir = Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir=parent))
        (rundir / OWNER).write_text(str(os.getpid()))
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
            # no over_budget: every N is measured (the sizing is what a slow machine trims)
            outcome = run_containers(plan, rundir, redis_url=redis_url(target.client), client=target.client,
                                     meter=target.meter, progress=progress, on_record=measured)
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
    cpu = round(r["ro"]["app_cpu_us"] + r["ro"]["store_cpu_us"], 1)
    point["ro_cpu_us"] = cpu
    point["rw_cpu_us"] = round(r["rw"]["app_cpu_us"] + r["rw"]["store_cpu_us"], 1)
    return RunRecord.stamped(  # ops_per_s and server_usec_per_call: the terminal table's req/s and CPU µs per read
        ctx.target.stamp, kind="containers", layout=r["container"], partitions=None, variant=r["label"], n=r["n"],
        bytes_per_item=r["bytes_per_session"], op="read", ops_per_s=r["ro"]["rps"], server_usec_per_call=cpu or None,
        points=[point],
        ops={"read": r["ro"], "write": r["rw"]},
        params={"generator": r["generator"], "profile": r["profile"], "active": r["active"],
                "housekeeping": r["housekeeping"], "densekv_layout": r["layout"]},
    )


def _describe(out: Output, plan: Any, outcome: Any, filesystem: str, seconds: float) -> None:
    from densekv.tools.lab.containers import findings
    from densekv.tools.lab.containers.registry import BY_NAME

    records = outcome.records
    out.add_method([
        ("One small Flask app run by gunicorn with one sync worker (so the in-process dict is one store, and "
         "requests per second are the inverse of the time per request), its session container chosen at "
         "start-up by environment variables; every app of the run starts once and stays up."),
        (f"Load: {outcome.generator or 'wrk'} at concurrency {plan.connections} (seed 003: ab -c 5), each "
         f"request carrying the cookie of a random one of {plan.active:,} sessions ({plan.profile} payloads, "
         "densekv.tools.lab.session_profiles); GET /r reads the session, GET /w also writes it. A response that "
         "found no session counts as a miss."),
        "Stored sessions N: besides the load's sessions, bulk-loaded (pipelines, one transaction, files written "
        "in place; never a request each) to N = " + ", ".join(f"{n:,}" for n in plan.ns)
        + "; half of them expire in a day, the rest after 30 days. At each N, "
        f"{plan.rounds} round(s) of {plan.requests:,} read-only and {plan.requests:,} read-write requests per "
        f"container (a load stops after {plan.ceiling_s:g} s, so a container that fell off answers fewer), the "
        "containers in turn (rotating order), after a warm-up; figures are medians over rounds.",
        ("CPU per request: the CPU time of the app's worker and of the store's own processes (the Redis server, "
         "memcached, PostgreSQL) over each load, from /proc, divided by its requests. Unlike req/s it barely "
         "moves when other work shares the machine, so the verdicts are read from it: a container falls when "
         f"its capacity (1 / CPU per read) at N = {plan.ns[-1]:,} is more than "
         f"{findings.FALLS:.0%} below the one at N = {plan.ns[0]:,}, and is flat otherwise."),
        (f"The run's directory (session files, SQLite databases) is on {filesystem}"
         + (" (/dev/shm: 100,000 tiny files on a disk cost ~400 MB of writes per file container and minutes to "
            "delete on a busy machine)" if filesystem == "tmpfs" else "") + "."),
        ("Bytes per stored session: the container's size delta over the sessions added (the load's own "
         "sessions and its writes not counted): RSS of the worker (dict) or of memcached, allocated blocks "
         "on disk (files), database pages including indexes (SQL), used_memory less client buffers (Redis)."),
        (f"Housekeeping at N = {plan.sweep_at if plan.housekeeping == 'at' else plan.ns[-1]:,}: the N/2 "
         "sessions that have expired (as of two days later) are removed while a read-only load runs: age sweep "
         "(files), DELETE ... WHERE expires < t (SQL), SessionStore.sweep() (densekv), a dict scan in the worker; "
         "they are stored again, uncounted, before the next N."),
        "Containers: " + "; ".join(f"{BY_NAME[r['container']].label}: {BY_NAME[r['container']].what}"
                                   for r in {r['container']: r for r in records}.values()) + ".",
    ])
    if not records:
        return
    found = findings.trends(records)
    out.figures.append(FigureSpec(
        "cpu", "CPU per request against stored sessions: the seed's verdict per container",
        " ".join(f"{t.short} - seed 003: {t.seed} ({t.seed_says})." for t in found),
        lambda fig: findings.draw_cpu(fig, records)))
    ns = sorted({p.n for t in found for p in t.points})
    out.tables.append(TableSpec(
        "The seed's verdict per container, from its points (read-only)",
        ["container", "seed 003", "here", "capacity"] + [f"CPU µs/read, N={n:,}" for n in ns]
        + [f"req/s, N={n:,}" for n in ns],
        [[t.label, t.seed, t.verdict, f"{t.change:+.0%}"]
         + [next((p.cpu_us for p in t.points if p.n == n), None) for n in ns]
         + [next((p.rps for p in t.points if p.n == n), None) for n in ns] for t in found],
        f"here: falls when the capacity (1 / CPU µs per read) at N = {ns[-1]:,} is more than {findings.FALLS:.0%} "
        f"below the one at N = {ns[0]:,}, flat otherwise; capacity: that change. The same points as the terminal "
        "table and summary.",
    ))
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
        [[r["label"], r["n"], r["ro"]["rps"], r["ro"]["p99_ms"], round(r["ro"]["app_cpu_us"] + r["ro"]["store_cpu_us"], 1),
          r["rw"]["rps"], r["rw"]["p99_ms"], round(r["rw"]["app_cpu_us"] + r["rw"]["store_cpu_us"], 1),
          r["bytes_per_session"], r["ro"]["misses"] + r["rw"]["misses"]] for r in records],
        f"CPU µs: per request, in the app's worker and the store's own processes (from /proc), which other work "
        f"on the machine moves far less than req/s. Files live on {filesystem}; the experiment took {seconds:.1f} s.",
    ))


EXPERIMENT = Containers()
