"""The measurement: every container filled to each N, then interleaved rounds of load,
then housekeeping while serving. The lab experiment and benchmarks/session_containers.py
both run `run_containers`; they differ only in the Plan.

For each container: its app (gunicorn, one sync worker) starts once, with the container
chosen by environment variables; `active` sessions are stored first, and the load
generator's requests carry their cookies (a random one per request). At each N of the
plan, N more sessions ("stored sessions": the ones the load does not touch, as seed
003's stale sessions) are added, half of them short-lived (they expire one day from
now, the rest after the full lifetime), and the container's bytes are read before and
after the addition. Then, for `rounds` rounds, each container in turn (the order
rotates every round, read-only and read-write alternate) takes `requests` read-only
requests (GET /r) and `requests` read-write requests (GET /w), after a warm-up in the
first round; figures per N are the medians over rounds, so a container compares with the
others measured in the same minutes; a load stops at `ceiling_s` even short of its
requests (a container that fell off answers fewer). Housekeeping (at each N, the last,
or one chosen N): while a read-only load runs, the
container's sweep removes the short-lived half (as of two days from now: the N/2 that
have "expired"); the sweep's time and the load's rate during it are recorded, and the
removed sessions are put back before the next N (not counted in the bytes).

CPU per request: the CPU time of the app's worker and of the store's own processes (the
Redis server, memcached, PostgreSQL's backends) over each load, per request, from
/proc: unlike requests per second it barely moves when other work shares the machine.

Bytes per session at N = the sum of the byte deltas of the counted additions / the
sessions they added: the active set, the load's writes to it and the sessions put back
after a sweep are not counted.
"""

from __future__ import annotations

import contextlib
import importlib.util
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from densekv.tools.lab.containers.backends import (
    Backend,
    Densekv,
    Files,
    FlaskSessionRedis,
    InProcess,
    Memcache,
    NoStore,
    Payloads,
    Sql,
)
from densekv.tools.lab.containers.components import FETCH_HINT, find_component
from densekv.tools.lab.containers.config import LIFETIME, AppConfig
from densekv.tools.lab.containers.load import LoadGenerator, LoadResult
from densekv.tools.lab.containers.processes import (
    AppServer,
    Memcached,
    Postgres,
    StartFailed,
    cpu_seconds,
    group_pids,
    stop_all,
)
from densekv.tools.lab.containers.registry import Container, container
from densekv.tools.lab.containers.stores import SqlStore

DAY = 86400


@dataclass(frozen=True)
class Plan:
    containers: tuple[str, ...]
    ns: tuple[int, ...]
    profile: str = "P2"
    active: int = 1000
    requests: int = 2000  # per load (read-only, read-write), per round
    warmup: int = 200
    rounds: int = 3
    housekeeping: str = "each"  # each N > 0 | last N only | none | at: the N of sweep_at only
    sweep_at: int = 0  # housekeeping="at": the N where the housekeeping runs
    connections: int = 5  # seed 003: ab -c 5
    ceiling_s: float = 30.0  # a load stops after this many seconds even if short of `requests`
    lifetime: int = LIFETIME
    short_s: int = DAY  # the short-lived half expires this long from now
    load: str = "wrk"  # wrk | python (the fallback; used anyway when wrk is missing)
    sweep_window_s: float = 1.0  # the load during housekeeping runs at least this long


@dataclass
class Slot:
    """One container during a run."""

    container: Container
    config: AppConfig
    backend: Backend
    app: AppServer | None = None
    load: LoadGenerator | None = None
    next_index: int = 0  # next payload-profile index to store
    short: int = 0  # short-lived background sessions stored
    long: int = 0
    put_back: int = 0  # swept sessions to store again before the next N (not counted)
    counted_bytes: int = 0
    counted_sessions: int = 0
    bytes_known: bool = True
    fill_seconds: float = 0.0
    layout: str | None = None


@dataclass
class Outcome:
    records: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    generator: str = ""
    unmeasured: list[str] = field(default_factory=list)  # containers not measured at all


def _missing_module(*modules: str) -> str | None:
    for m in modules:
        if importlib.util.find_spec(m) is None:
            return m
    return None


def why_not(name: str, redis_url: str | None) -> str | None:
    """Why a container cannot be measured on this machine (None: it can)."""
    c = container(name)
    if c.needs == "redis" and not redis_url:
        return "no Redis/Valkey server for this run"
    missing = _missing_module("flask", "gunicorn")
    if missing:
        return f"{missing} is not installed (pip install flask gunicorn)"
    if name == "redis-json" and _missing_module("flask_session", "msgspec"):
        return "Flask-Session is not installed (pip install Flask-Session)"
    if name.startswith("densekv"):
        try:
            import densekv.integrations.flask  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - the backend is being written beside us: say why, go on
            return f"densekv.integrations.flask does not import yet ({type(exc).__name__}: {exc})"
    if c.needs == "memcached":
        if _missing_module("pymemcache", "flask_session"):
            return "pymemcache or Flask-Session is not installed (pip install pymemcache Flask-Session)"
        if find_component("memcached") is None:
            return f"no memcached on this machine ({FETCH_HINT})"
    if c.needs == "postgres":
        if _missing_module("psycopg"):
            return "psycopg is not installed (pip install 'psycopg[binary]')"
        if find_component("postgresql") is None:
            return f"no PostgreSQL on this machine ({FETCH_HINT})"
    return None


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


@dataclass
class Measured:
    """One load and the CPU time it cost: in the app's worker and in the store's processes."""

    load: LoadResult
    app_cpu_s: float
    store_cpu_s: float


def summarize(runs: list[Measured]) -> dict[str, Any]:
    results = [m.load for m in runs]

    def per_request_us(cpu: list[float]) -> float:
        return round(_median([c / m.load.requests * 1e6 for c, m in zip(cpu, runs) if m.load.requests]), 1)

    return {
        "app_cpu_us": per_request_us([m.app_cpu_s for m in runs]),
        "store_cpu_us": per_request_us([m.store_cpu_s for m in runs]),
        "rps": round(_median([r.rps for r in results]), 1),
        "p50_ms": round(_median([r.p50_ms for r in results]), 3),
        "p99_ms": round(_median([r.p99_ms for r in results]), 3),
        "rps_rounds": [round(r.rps, 1) for r in results],
        "p99_rounds": [round(r.p99_ms, 3) for r in results],
        "requests": sum(r.requests for r in results),
        "misses": sum(r.misses for r in results),
        "errors": sum(r.errors for r in results),
    }


class Run:
    """One run of a plan in `rundir` (everything is written there)."""

    def __init__(self, plan: Plan, rundir: Path, *, redis_url: str | None = None, client: Any = None,
                 meter: Any = None, progress: Callable[[str], None] | None = None,
                 over_budget: Callable[[], bool] | None = None,
                 on_record: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.plan = plan
        self.rundir = rundir
        self.redis_url = redis_url
        self.client = client
        self.meter = meter
        self.say = progress or (lambda _: None)
        self.over_budget = over_budget or (lambda: False)
        self.on_record = on_record or (lambda _: None)
        self.outcome = Outcome()
        self.slots: list[Slot] = []
        self.helpers: list[Any] = []  # memcached, PostgreSQL: started once, shared by containers
        self._pg: Postgres | None = None
        self.payloads = Payloads(plan.profile)  # session i is generated once, for every container

    # -- setting up ------------------------------------------------------------------------
    def _backend(self, stack: contextlib.ExitStack, c: Container, config: AppConfig) -> tuple[Backend, AppConfig]:
        plan = self.plan
        name = c.name
        if name == "none":
            return NoStore(config, plan.profile), config
        if name == "dict":
            return InProcess(config, plan.profile), AppConfig(**{**config.__dict__, "admin": True})
        if name.startswith("files"):
            return Files(config, plan.profile), config
        if name.startswith("sqlite"):
            return Sql(config, plan.profile,
                       lambda: SqlStore.sqlite(config.sqlite_path, indexed=name == "sqlite-indexed")), config
        if name.startswith("postgres"):
            server = self._postgres(stack)
            db = name.replace("-", "_")
            import psycopg

            with psycopg.connect(server.conninfo, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {db}")
            conninfo = server.conninfo.replace("dbname=postgres", f"dbname={db}")
            config = AppConfig(**{**config.__dict__, "url": conninfo})
            return Sql(config, plan.profile, lambda: SqlStore.postgres(conninfo, indexed=name == "postgres-indexed"),
                       lambda: group_pids(server.pid) if server.pid else []), config
        if name == "memcached":
            component = find_component("memcached")
            assert component is not None
            mc = stack.enter_context(Memcached(component, self.rundir).start())
            self.helpers.append(mc)
            config = AppConfig(**{**config.__dict__, "url": mc.address})
            return Memcache(config, plan.profile, mc.rss, mc.pid), config
        assert self.redis_url is not None
        config = AppConfig(**{**config.__dict__, "url": self.redis_url})
        if name == "redis-json":
            return FlaskSessionRedis(config, plan.profile, self.client, self.meter), config
        return Densekv(config, plan.profile, self.client, self.meter), config

    def _postgres(self, stack: contextlib.ExitStack) -> Postgres:
        if self._pg is None:
            component = find_component("postgresql")
            assert component is not None
            self._pg = stack.enter_context(Postgres(component, self.rundir).start())
            self.helpers.append(self._pg)
        return self._pg

    def _open(self, stack: contextlib.ExitStack) -> None:
        plan = self.plan
        expected = plan.active + max(plan.ns, default=0)
        apps: list[AppServer] = []
        stack.callback(stop_all, apps)  # every app, all at once, whatever happens
        for name in plan.containers:
            reason = why_not(name, self.redis_url)
            if reason:
                self.outcome.notes.append(f"{name}: not measured - {reason}")
                self.outcome.unmeasured.append(name)
                continue
            c = container(name)
            home = self.rundir / name
            home.mkdir(parents=True, exist_ok=True)
            base = AppConfig(name, home, lifetime=plan.lifetime, expected=expected)
            try:
                backend, config = self._backend(stack, c, base)
            except StartFailed as exc:  # memcached or PostgreSQL would not start: a note
                self.outcome.notes.append(f"{name}: not measured - {exc}")
                self.outcome.unmeasured.append(name)
                continue
            stack.callback(backend.close)
            backend.payloads = self.payloads
            backend.prepare()
            app = AppServer(config, home)
            apps.append(app)
            app.start(wait=False)
            self.slots.append(Slot(c, config, backend, app))
        self.say(f"started {len(self.slots)} apps")
        for slot in self.slots:
            assert slot.app is not None
            slot.app.ready()
            slot.backend.attach(slot.app.url)
            tokens = slot.backend.fill(0, plan.active, time.time() + plan.lifetime)
            slot.next_index = plan.active
            slot.load = LoadGenerator(slot.config.dir, tokens, connections=plan.connections, seed=3,
                                      prefer=plan.load)
            self.outcome.generator = slot.load.generator
            if isinstance(slot.backend, Densekv):
                slot.layout = slot.backend.layout()

    # -- measuring -------------------------------------------------------------------------
    def _fill(self, slot: Slot, n: int) -> dict[str, Any]:
        """Bring the slot's stored sessions to n (half short-lived where it sweeps)."""
        plan, b = self.plan, slot.backend
        now = time.time()
        if slot.put_back:  # sweep victims go back first, uncounted
            b.fill(slot.next_index, slot.put_back, now + plan.short_s)
            slot.next_index += slot.put_back
            slot.short += slot.put_back
            slot.put_back = 0
        want_short = n // 2 if slot.container.sweeps else 0
        add_short = max(0, want_short - slot.short)
        add_long = max(0, n - want_short - slot.long)
        if add_short + add_long == 0:
            return {"added": 0}
        before = b.size()
        t0 = time.perf_counter()
        for count, expires in ((add_short, now + plan.short_s), (add_long, now + plan.lifetime)):
            if count:
                b.fill(slot.next_index, count, expires)
                slot.next_index += count
        seconds = time.perf_counter() - t0
        after = b.size()
        slot.short += add_short
        slot.long += add_long
        slot.fill_seconds += seconds
        if before is None or after is None:
            slot.bytes_known = False
        else:
            slot.counted_bytes += after - before
            slot.counted_sessions += add_short + add_long
        return {"added": add_short + add_long, "seconds": round(seconds, 3), "size_after": after}

    def _measure(self, slot: Slot, path: str) -> Measured:
        assert slot.app is not None and slot.load is not None
        workers = slot.app.worker_pids()
        stores = slot.backend.store_pids()
        app0, store0 = cpu_seconds(workers), cpu_seconds(stores)
        result = slot.load.run(slot.app.url + path, self.plan.requests, self.plan.ceiling_s)
        return Measured(result, cpu_seconds(workers) - app0, cpu_seconds(stores) - store0)

    def _loads(self, n: int) -> dict[str, dict[str, list[Measured]]]:
        plan = self.plan
        got: dict[str, dict[str, list[Measured]]] = {s.container.name: {"ro": [], "rw": []} for s in self.slots}
        for r in range(plan.rounds):
            k = r % max(1, len(self.slots))
            for slot in self.slots[k:] + self.slots[:k]:
                assert slot.app is not None and slot.load is not None
                if r == 0 and plan.warmup:
                    slot.load.run(slot.app.url + "/r", plan.warmup, plan.ceiling_s)
                    slot.load.run(slot.app.url + "/w", max(1, plan.warmup // 2), plan.ceiling_s)
                mixes = ("ro", "rw") if r % 2 == 0 else ("rw", "ro")
                for mix in mixes:
                    got[slot.container.name][mix].append(self._measure(slot, "/r" if mix == "ro" else "/w"))
            self.say(f"N={n:,}: round {r + 1}/{plan.rounds} done")
        return got

    def _housekeep(self, slot: Slot, n: int) -> dict[str, Any] | None:
        if not slot.container.sweeps or slot.short == 0:
            return None
        assert slot.app is not None and slot.load is not None
        as_of = time.time() + 2 * self.plan.short_s
        handle = slot.load.start(slot.app.url + "/r", ceiling_s=max(60.0, 10 * self.plan.ceiling_s))
        try:
            t0 = time.perf_counter()
            removed = slot.backend.sweep(as_of)
            seconds = time.perf_counter() - t0
            if seconds < self.plan.sweep_window_s:  # the load's window: at least this long
                time.sleep(self.plan.sweep_window_s - seconds)
        finally:
            during = slot.load.finish(slot.app.url + "/r", handle)
        removed = removed or 0
        slot.short -= removed
        slot.put_back += removed
        return {"expired": slot.short + removed, "removed": removed, "seconds": round(seconds, 4),
                "during": during.to_dict()}

    def _record(self, slot: Slot, n: int, fill: dict[str, Any], loads: dict[str, list[Measured]],
                housekeeping: dict[str, Any] | None) -> dict[str, Any]:
        per = (slot.counted_bytes / slot.counted_sessions
               if slot.bytes_known and slot.counted_sessions else None)
        return {
            "container": slot.container.name,
            "label": slot.container.label,
            "needs": slot.container.needs,
            "n": n,
            "profile": self.plan.profile,
            "active": self.plan.active,
            "ro": summarize(loads["ro"]),
            "rw": summarize(loads["rw"]),
            "bytes_per_session": None if per is None else round(per, 1),
            "size_bytes": fill.get("size_after"),
            "fill": fill,
            "housekeeping": housekeeping,
            "generator": slot.load.generator if slot.load else "",
            "layout": slot.layout,
        }

    def run(self) -> Outcome:
        plan = self.plan
        with contextlib.ExitStack() as stack:
            self._open(stack)
            if not self.slots:
                return self.outcome
            for i, n in enumerate(plan.ns):
                if i and self.over_budget():
                    self.outcome.notes.append(
                        "N = " + ", ".join(f"{m:,}" for m in plan.ns[i:]) + ": not measured - the time budget ran out")
                    break
                fills = {}
                for slot in self.slots:
                    self.say(f"N={n:,}: filling {slot.container.name}")
                    fills[slot.container.name] = self._fill(slot, n)
                loads = self._loads(n)
                sweep_here = n > 0 and (plan.housekeeping == "each" or
                                        (plan.housekeeping == "last" and n == plan.ns[-1]) or
                                        (plan.housekeeping == "at" and n == plan.sweep_at))
                for slot in self.slots:
                    hk = None
                    if sweep_here:
                        self.say(f"N={n:,}: housekeeping {slot.container.name}")
                        hk = self._housekeep(slot, n)
                    record = self._record(slot, n, fills[slot.container.name], loads[slot.container.name], hk)
                    self.outcome.records.append(record)
                    self.on_record(record)
        return self.outcome


def run_containers(plan: Plan, rundir: Path, **kwargs: Any) -> Outcome:
    """Run `plan` with everything in `rundir`; every process started is stopped on return,
    on error and on Ctrl-C (KeyboardInterrupt unwinds the same `with`)."""
    return Run(plan, rundir, **kwargs).run()
