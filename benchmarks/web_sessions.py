"""Web sessions against the peers (issue 11): bytes per session for payload profiles P0-P3,
and the time of a request that reads its session, densekv against Flask-Session 0.8,
Django's cache session backend and starsessions 2.2 (benchmarks/web_peers.py drives them).

Memory: for each server, N, profile and store (interleaved: densekv, then each peer, for
one (server, N, profile) before the next), a fresh child process on a freshly started
server: 200 sessions through the same loader to warm up every command (then flushed by the
meter), the meter's baseline, N sessions of `densekv.tools.lab.session_profiles.session(profile,
n)`, densekv's Meter (bytes_per_item) beside a plain used_memory delta (INFO on the fresh
server before anything, and after the load). densekv: `SessionStore(client, namespace=
"sess", expected_sessions=N)` (auto layout, identity index on), sessions put in batches of
BATCH through the store's own record path (what create_many runs, with each session's own
data); when the store has `train_dictionary`, its zstd dictionary is trained on the data
of the first TRAIN_N sessions before any is stored, so every session is written with it
("dictionary" in the record). Every record reads a sample back through the store's own
load path and fails on a mismatch.

Timing: per framework, on a fresh server, a child process builds two apps that differ only
in their session backend (densekv's integration, the peer), preloads --timing-sessions P1
sessions into each store, seeds SEEDED sessions through each app (POST /seed, the
framework's own write path) and times GET /get/_auth_user_id through the framework's test
client in interleaved rounds (A B, B A, ...) of --requests requests each: median and p90
per request, densekv/peer of the medians (`ratio`) and the median of the per-round ratios
(`ratio_paired`: each round's two halves ran back to back, so it holds up better on a busy
machine). "flask-norefresh" is Flask with SESSION_REFRESH_EACH_REQUEST=False in both apps
(Flask-Session then stops re-writing the session on every read). A framework whose densekv
integration does not import yet is skipped with the reason in the record.

End to end (issue 22): per framework and server, --e2e-sessions sessions of --e2e-profile
(P1 Django logins by default; P2 Flask-Login, reading `_user_id`) per store (the
loaders), both apps served (web_peers.SERVE: gunicorn, or 2 asyncio servers with a socket each) and wrk
(scripts/get-components) on one at a time in interleaved rounds: 90% GET /get/_auth_user_id,
10% POST /seed {"n": ...} (--e2e-writes: another share; 0 and 100 time reads and writes
apart), each with a random stored session's cookie, from 4 connections
(16 for uvicorn: CONNECTIONS). Per app: req/s and
p99 (wrk), and CPU time per request of the app server and of Redis (/proc: it holds up on a
busy machine, req/s does not), and per request the server's socket reads, writes, bytes and
accepted connections (INFO stats: `*_server_io`). `met`: median req/s >= the peer's and p99
no worse.

The run copies densekv/ to a temporary directory first and every child imports that copy
(`densekv_digest` in each record), so a run of an hour measures one state of the code.

Usage: python benchmarks/web_sessions.py [--quick] [--n 100000 --n 1000000]
       [--servers valkey-9.1,redis-7.0] [--stores densekv,flask-session,django-cache,starsessions]
       [--profiles P0,P1,P2,P3] [--parts memory,timing]
       [--frameworks flask,flask-norefresh,django,starlette]
       [--requests 1000] [--rounds 12] [--timing-sessions 100000] [--out FILE]
       --parts e2e [--rounds 7] [--seconds 6] [--connections N] [--e2e-sessions 10000] [--e2e-fill F]
       [--e2e-writes 10]
Tables: ... | python benchmarks/markdown_table.py                    (bytes per session)
        ... | python benchmarks/markdown_table.py --field x_densekv   (peer / densekv)
        ... | python benchmarks/markdown_table.py --field ratio_paired --row framework,peer
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
import redis
import web_peers
from records import emit  # benchmarks/records.py: print and append each record
from web_peers import Item, Sample

from densekv.tools.lab.session_profiles import NAMES, PROFILES, django_login_written, session
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

#: the memory part's default (--stores django-redis too, where django-redis is installed)
STORES = ("densekv", *(s for s in web_peers.LOADERS if s not in ("aiohttp-session", "django-redis")))
#: the default --frameworks; "aiohttp" (against aiohttp-session's RedisStorage) and
#: "django-redis" (Django against django-redis's cache backend, `pip install django-redis`)
#: run in the e2e part only (the timing part has no test-client app for them):
#: --frameworks aiohttp,django-redis
FRAMEWORKS = tuple(f for f in web_peers.PEER_OF if f not in ("aiohttp", "django-redis"))
TTL = 30 * 24 * 3600  # every store keeps a session 30 days
BATCH = 1000  # densekv sessions per round trip
TRAIN_N = 2000  # sessions whose data trains the dictionary (the store's own AUTO_TRAIN)
WARM_N = 200  # sessions written (then flushed) before the baseline
SAMPLES = 25  # sessions read back through each store's own load path
SEEDED = 256  # sessions per app the timed requests cycle through
READ_KEY = "_auth_user_id"
#: the key an e2e GET reads, by --e2e-profile (P1 a Django login, P2 Flask-Login)
E2E_READ_KEY = {"P1": "_auth_user_id", "P1n": "_auth_user_id", "P2": "_user_id", "P3": "_auth_user_id"}
E2E_WRITES = 10  # percent of e2e requests that write one key (--e2e-writes)
SCRATCH = {"slowlog-log-slower-than": "-1"}
#: wrk's connections per framework (e2e): a sync gunicorn worker serves one request at a
#: time, so 4 keep both busy; a uvicorn worker keeps the keep-alive connections the kernel
#: handed it (SO_REUSEPORT: web_peers.uvicorn_workers), and 16 spread evenly enough that a
#: round does not measure a 3-to-1 split of 4 connections (req/s moved by 1.5x with it)
CONNECTIONS = {"flask": 4, "flask-norefresh": 4, "django": 4, "django-redis": 4, "starlette": 16, "aiohttp": 16}  # slowlog entries are not data (see measure.py)


def items(profile: str, start: int, stop: int) -> Iterator[Item]:
    """Sessions start .. stop-1 of a profile; "P1n" (e2e only) is a Django login that already
    holds the key "n" the mix writes (session_profiles.django_login_written): the dictionary,
    trained on these, knows it (with P1 it does not, and the mix's writes split most records,
    benchmarks/record_bytes.py P1w)."""
    for n in range(start, stop):
        identity, data = django_login_written(n) if profile == "P1n" else session(profile, n)
        yield n, identity, data


# -- densekv ---------------------------------------------------------------------------------
def fill_option(fill: str | None) -> dict[str, Any]:
    """SessionStore's fill= from --e2e-fill: nothing (the store's default) for None,
    fill=None (the densest partitions) for "none", else the number."""
    if fill is None:
        return {}
    return {"fill": None if fill == "none" else int(fill)}


class DensekvLoader:
    name = "densekv"
    driven = (f"SessionStore(namespace='sess', expected_sessions=N): batches of {BATCH} records "
              "made by the store core's new_records() (one per session, its own data) and "
              "stored by put_records(), the path create_many() runs; verified with store.get()")

    def __init__(self, url: str, n: int, ttl: int, *, train: bool = True, fill: str | None = None) -> None:
        import densekv

        self.client = redis.Redis.from_url(url)
        self.store = densekv.SessionStore(self.client, namespace="sess", expected_sessions=n,
                                          ttl=ttl, **fill_option(fill))
        self.train = train and hasattr(self.store, "train_dictionary")
        self.dictionary: int | None = None
        self.trained_on = 0

    def _put(self, batch: list[Item]) -> list[str]:
        return self.store.create_each(((identity, data) for _, identity, data in batch),
                                      batch=max(1, len(batch)))

    def load(self, stream: Iterable[Item], keep: Callable[[int], bool]) -> list[Sample]:
        stream = iter(stream)
        first: list[Item] = []
        if self.train:  # on the data of the first TRAIN_N sessions, before any is stored
            first = list(itertools.islice(stream, TRAIN_N))
            self.dictionary = self.store.train_dictionary([data for _, _, data in first])
            self.trained_on = len(first)
        samples: list[Sample] = []
        rest = itertools.chain(first, stream)
        while batch := list(itertools.islice(rest, BATCH)):
            for (n, _, data), token in zip(batch, self._put(batch)):
                if keep(n):
                    samples.append((token, data))
        return samples

    def verify(self, samples: list[Sample]) -> None:
        for token, want in samples:
            got = self.store.get(token)
            if got is None or got.data != want:
                raise AssertionError(f"densekv: session {token[:8]}... loads as {got!r}")

    def stats(self) -> dict[str, Any]:
        """What the record says of the store: layout, partitions, the dictionary and how many
        sessions went out of line (stats() once it reports them; until then a SCAN of the
        layout's out-of-line keys)."""
        stats = self.store.stats()
        out: dict[str, Any] = {k: stats.get(k) for k in ("layout", "partitions", "index_partitions",
                                                           "refused_too_large", "sessions")}
        out["dictionary_id"] = stats.get("dictionary")
        counted = [k for k in stats if "out_of_line" in k]
        if counted:
            out.update({k: stats[k] for k in counted}, out_of_line_from="stats()")
        elif self.store.explain().get("partitions"):  # out-of-line keys: {ns}:so:{R}:<digest>
            prefix = b"sess:so:"
            out["out_of_line"] = sum(1 for _ in self.client.scan_iter(match=prefix + b"*", count=1000))
            out["out_of_line_from"] = f"SCAN {prefix.decode()}*"
        return out

    def close(self) -> None:
        self.client.close()


def make_loader(store: str, url: str, n: int, ttl: int) -> Any:
    if store == "densekv":
        return DensekvLoader(url, n, ttl)
    return web_peers.LOADERS[store](url, ttl)


# -- one memory measurement (runs in a child process) ---------------------------------------
def listpack_settings(client: redis.Redis) -> dict[str, int]:
    names = ("hash-max-listpack-entries", "hash-max-listpack-value")
    return {k.replace("-", "_"): int(client.config_get(k)[k]) for k in names}


def measure_memory(server: str, store: str, profile: str, n: int, ttl: int) -> dict[str, Any]:
    with ServerProcess(find_servers()[server], options=SCRATCH) as proc:
        client = proc.client()
        plain_before = int(client.info("memory")["used_memory"])
        meter = Meter(client)
        warm = make_loader(store, proc.url, WARM_N, ttl)
        warm.load(items(profile, n, n + WARM_N), lambda _: False)
        warm.close()
        meter.reset()
        loader = make_loader(store, proc.url, n, ttl)
        step = max(1, n // SAMPLES)
        t0 = time.perf_counter()
        samples = loader.load(items(profile, 0, n), lambda i: i % step == 0)
        load_s = time.perf_counter() - t0
        loader.close()  # the meter wants the loading connections closed
        delta = meter.delta()
        plain = (int(client.info("memory")["used_memory"]) - plain_before) / n
        usage = meter.memory_usage_per_item(n)
        loader.verify(samples)
        record: dict[str, Any] = {
            "benchmark": "web_sessions", "part": "memory", "commit": gitstamp.commit(),
            "server": server, "version": meter.version, "allocator": meter.allocator,
            **listpack_settings(client), "store": store, "profile": profile,
            "profile_name": NAMES[profile], "n": n, "bytes_per_item": round(delta / n, 2),
            "plain_bytes_per_item": round(plain, 2),
            "meter_vs_plain_pct": round(100 * (delta / n - plain) / plain, 2),
            "memory_usage_bytes_per_item": round(usage or 0, 2), "keys": client.dbsize(),
            "ttl": ttl, "load_s": round(load_s, 1), "create_per_s": round(n / load_s),
            "verified": len(samples), "driven": loader.driven,
        }
        if isinstance(loader, DensekvLoader):
            record.update(dictionary=loader.dictionary is not None,
                          dictionary_trained_on=loader.trained_on or None, **loader.stats())
        loader.close()
        client.close()
    return record


# -- one timing measurement (runs in a child process) ---------------------------------------
class Skip(Exception):
    """The densekv integration of this framework is not there yet."""


INTEGRATION = {"flask": ("flask", "SessionInterface"), "flask-norefresh": ("flask", "SessionInterface"),
               "django": ("django", "SessionStore"), "starlette": ("starlette", "SessionMiddleware")}


def integration(framework: str) -> Any:
    """densekv's entry point for this framework, or Skip saying why it is not there."""
    module, attr = INTEGRATION[framework]
    try:
        return getattr(importlib.import_module(f"densekv.integrations.{module}"), attr)
    except (ImportError, AttributeError) as exc:
        raise Skip(f"densekv.integrations.{module}.{attr} does not import yet: "
                   f"{type(exc).__name__}: {exc}") from exc


def browsers(framework: str, url: str, n: int, ttl: int) -> tuple[Any, Any, str]:
    """(densekv's app, the peer's app, a note on how both were configured). Built after the
    preload, so densekv's store opens a namespace that already has its dictionary."""
    entry = integration(framework)
    if framework in ("flask", "flask-norefresh"):
        import densekv

        refresh = framework == "flask"
        store = densekv.SessionStore(redis.Redis.from_url(url), namespace="sess",
                                     expected_sessions=n, ttl=ttl)
        return (web_peers.FlaskBrowser(web_peers.flask_app(entry(store), ttl, refresh=refresh)),
                web_peers.flask_peer_browser(url, ttl, refresh=refresh),
                (f"SESSION_REFRESH_EACH_REQUEST={refresh} for both apps" +
                 ("" if not refresh else " (Flask's default: Flask-Session sessions are permanent "
                  "by default, so it re-SETs the session on every request)")))
    if framework == "django":
        web_peers.django_configure(url, ttl, {"url": url, "namespace": "sess",
                                              "expected_sessions": n, "ttl": ttl})
        return (web_peers.DjangoBrowser("densekv.integrations.django"),
                web_peers.DjangoBrowser("django.contrib.sessions.backends.cache"),
                ("Django defaults (a read-only request saves nothing); SessionMiddleware, "
                 "cookie 'session', SESSION_COOKIE_AGE = ttl"))
    if framework == "starlette":
        from redis.asyncio import Redis as AsyncRedis
        from starlette.middleware import Middleware

        import densekv

        store = densekv.AsyncSessionStore(AsyncRedis.from_url(url), namespace="sess",
                                          expected_sessions=n, ttl=ttl)
        app = web_peers.starlette_app(Middleware(entry, store=store), load_first=False)
        return (web_peers.StarletteBrowser(app), web_peers.starlette_peer_browser(url, ttl),
                ("starsessions SessionMiddleware(lifetime=ttl), load_session() in the route; "
                 "it saves the session on every request that loaded it"))
    raise ValueError(framework)


def measure_timing(server: str, framework: str, n: int, requests: int, rounds: int,
                   ttl: int) -> dict[str, Any]:
    peer = web_peers.PEER_OF[framework]
    record: dict[str, Any] = {"benchmark": "web_sessions", "part": "timing",
                              "commit": gitstamp.commit(), "server": server,
                              "framework": framework, "peer": peer, "profile": "P1",
                              "preloaded": n, "seeded": SEEDED, "requests": requests,
                              "rounds": rounds, "table_row": ["framework", "peer"]}
    with ServerProcess(find_servers()[server], options=SCRATCH) as proc:
        client = proc.client()
        info = client.info("server")
        record["version"] = str(info.get("valkey_version") or info["redis_version"])
        try:
            integration(framework)
        except Skip as why:
            return {**record, "skipped": str(why)}
        for loader in (DensekvLoader(proc.url, n, ttl), make_loader(peer, proc.url, n, ttl)):
            loader.load(items("P1", 0, n), lambda _: False)
            if isinstance(loader, DensekvLoader):
                record["dictionary"] = loader.dictionary is not None
            loader.close()
        ours, theirs, record["config"] = browsers(framework, proc.url, n, ttl)
        seeds = [session("P1", i)[1] for i in range(n, n + SEEDED)]
        cookies = {}
        for label, browser in (("densekv", ours), (peer, theirs)):
            cookies[label] = [browser.seed(data) for data in seeds]
            for cookie, data in zip(cookies[label], seeds):  # the timed reads really read
                got = browser.read(cookie, READ_KEY)
                if got != data[READ_KEY]:
                    raise AssertionError(f"{label}: a seeded session reads back {got!r}")
        times: dict[str, list[int]] = {"densekv": [], peer: []}
        per_round: dict[str, list[float]] = {"densekv": [], peer: []}

        def run(label: str, browser: Any, count: int, keep: bool) -> None:
            jar = cookies[label]
            took = []
            for i in range(count):
                cookie = jar[i % SEEDED]
                t0 = time.perf_counter_ns()
                browser.read(cookie, READ_KEY)
                took.append(time.perf_counter_ns() - t0)
            if keep:
                times[label] += took
                per_round[label].append(round(statistics.median(took) / 1000, 1))

        pair = [("densekv", ours), (peer, theirs)]
        for label, browser in pair:
            run(label, browser, min(requests, 500), keep=False)  # warm-up
        for r in range(rounds):
            for label, browser in pair if r % 2 == 0 else pair[::-1]:
                run(label, browser, requests, keep=True)
        for b in (ours, theirs):
            b.close()

    def q(label: str, p: float) -> float:
        return round(statistics.quantiles(times[label], n=100)[int(p) - 1] / 1000, 1)

    ours_us = statistics.median(times["densekv"]) / 1000
    theirs_us = statistics.median(times[peer]) / 1000
    paired = [a / b for a, b in zip(per_round["densekv"], per_round[peer])]
    return {**record, "densekv_median_us": round(ours_us, 1), "peer_median_us": round(theirs_us, 1),
            "densekv_p90_us": q("densekv", 90), "peer_p90_us": q(peer, 90),
            "ratio": round(ours_us / theirs_us, 3),
            "ratio_paired": round(statistics.median(paired), 3),
            "ratio_paired_range": [round(min(paired), 3), round(max(paired), 3)],
            "densekv_round_medians_us": per_round["densekv"], "peer_round_medians_us": per_round[peer]}


# -- end to end (issue 22 section 2): apps under gunicorn / uvicorn, driven by wrk ---------
WRK_LUA = """
local cookies, writes = {}, 10
function init(args)
  for line in io.lines(args[1]) do cookies[#cookies + 1] = line end
  writes = tonumber(args[2]); math.randomseed(tonumber(args[3]))
end
function request()
  local h = {["Cookie"] = "session=" .. cookies[math.random(#cookies)]}
  if math.random(100) > writes then return wrk.format("GET", "/get/READ_KEY", h) end
  h["Content-Type"] = "application/json"
  return wrk.format("POST", "/seed", h, '{"n": ' .. math.random(1000000) .. '}')
end
function done(s, latency, requests)
  local e = s.errors
  io.write(string.format('E2E {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, '
    .. '"errors": %d}\\n', s.requests, s.duration, latency:percentile(50),
    latency:percentile(99), e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def cpu_s(group: int, pid: int) -> tuple[float, float]:
    """CPU seconds used so far by process group `group` (an app server) and process `pid`."""
    app = server = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            ticks = int(fields[11]) + int(fields[12])
            app += ticks if int(fields[2]) == group else 0
            server += ticks if stat.parent.name == str(pid) else 0
    return app / os.sysconf("SC_CLK_TCK"), server / os.sysconf("SC_CLK_TCK")


def command_calls(stats: redis.Redis | None) -> dict[str, int]:
    """Calls per command name so far (INFO commandstats), {} without a client."""
    if stats is None:
        return {}
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.info("commandstats").items()}


#: INFO stats counters kept per request (e2e): the socket reads and writes the server made,
#: its bytes in and out and the connections it accepted, beside the commands; server_io()
#: adds the commands' usec (commandstats) and, on Valkey, its event loop's cycles and time
SERVER_IO = ("total_reads_processed", "total_writes_processed", "total_net_input_bytes",
             "total_net_output_bytes", "total_connections_received")


def server_io(stats: redis.Redis | None) -> dict[str, int]:
    """The SERVER_IO counters so far, {} without a client."""
    if stats is None:
        return {}
    info = {**stats.info("stats"), **stats.info("commandstats")}
    got = {name.removeprefix("total_"): int(info.get(name, 0)) for name in SERVER_IO}
    for k, v in info.items():  # a script's usec holds the commands it ran (also booked apart)
        if k.startswith("cmdstat_") and k != "cmdstat_info":
            got[f"usec_{k.removeprefix('cmdstat_')}"] = int(v["usec"])
    for name in ("eventloop_cycles", "eventloop_duration_sum", "eventloop_duration_cmd_sum"):
        if name in info:  # Valkey 8+
            got[name] = int(info[name])
    return got


def wrk_run(wrk: str, script: Path, port: int, jar: Path, seconds: int, connections: int,
            seed: int, group: int = 0, server_pid: int = 0,
            stats: redis.Redis | None = None, writes: int = E2E_WRITES) -> dict[str, Any]:
    argv = [wrk, "-t", "1", "-c", str(connections), "-d", f"{seconds}s", "--timeout", "5s",
            "-s", str(script), f"http://127.0.0.1:{port}", "--", str(jar), str(writes), str(seed)]
    calls, io = command_calls(stats), server_io(stats)
    before = cpu_s(group, server_pid)
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    after = cpu_s(group, server_pid)
    calls_after, io_after = command_calls(stats), server_io(stats)
    got = json.loads(next(line[4:] for line in out.splitlines() if line.startswith("E2E ")))
    if stats is not None:  # Redis commands per request, the INFO calls themselves left out
        got["commands"] = {name: round((n - calls.get(name, 0)) / got["requests"], 3)
                           for name, n in sorted(calls_after.items())
                           if n > calls.get(name, 0) and name != "info"}
        got["server_io"] = {name: round((n - io.get(name, 0)) / got["requests"], 3)
                            for name, n in io_after.items() if n > io.get(name, 0)}
    got["rps"] = round(got["requests"] / (got["duration_us"] / 1e6), 1)
    got["app_cpu_us"] = round((after[0] - before[0]) / got["requests"] * 1e6, 1)
    got["server_cpu_us"] = round((after[1] - before[1]) / got["requests"] * 1e6, 1)
    return dict(got)


def measure_e2e(server: str, framework: str, n: int, rounds: int, seconds: int,
                connections: int, ttl: int, profile: str = "P1", fill: str | None = None,
                writes: int = E2E_WRITES) -> dict[str, Any]:
    """One framework on one server: both apps up at once, wrk on one at a time, the order
    alternating per round (densekv first in even rounds)."""
    from densekv.tools.lab.containers.components import find_component
    if (wrk := find_component("wrk")) is None:
        raise RuntimeError("no wrk: scripts/get-components --only wrk fetches it")
    peer = web_peers.PEER_OF[framework]
    record: dict[str, Any] = {
        "benchmark": "web_sessions", "part": "e2e", "commit": gitstamp.commit(), "server": server,
        "framework": framework, "peer": peer, "profile": profile, "profile_name": NAMES.get(profile, "django_login plus n"), "sessions": n,
        "mix": f"{100 - writes}% GET /get/{E2E_READ_KEY[profile]}, {writes}% POST /seed {{n}} (a one-key write), "
               "random cookie",
        "served": web_peers.SERVED_AS.get(web_peers.base(framework),
                                          " ".join(web_peers.SERVE[web_peers.base(framework)][:-1])),
        "load": f"wrk {wrk.version} -t1 -c{connections} -d{seconds}s", "rounds": rounds,
        "refresh_each_request": not framework.endswith("-norefresh"), "fill": fill or "default",
        "table_row": ["framework", "peer"]}
    work = Path(tempfile.mkdtemp(prefix="web_e2e_"))
    (script := work / "mix.lua").write_text(WRK_LUA.replace("READ_KEY", E2E_READ_KEY[profile]))
    procs: list[Any] = []
    try:
        with ServerProcess(find_servers()[server], options=SCRATCH) as proc:
            info = proc.client().info("server")
            record["version"] = str(info.get("valkey_version") or info["redis_version"])
            ports, jars, groups = {}, {}, {}
            for label, ours in (("densekv", True), (peer, False)):
                loader = DensekvLoader(proc.url, n, ttl, fill=fill) if ours else make_loader(peer, proc.url, n, ttl)
                samples = loader.load(items(profile, 0, n), lambda _: True)
                if ours:
                    record["partitions"] = loader.store.explain()["partitions"]
                loader.close()
                jars[label] = work / f"{label}.cookies"
                jars[label].write_text("".join(sid + "\n" for sid, _ in samples))
                ports[label] = web_peers.free_port()
                procs.append(web_peers.serve(framework, ours, proc.url, ttl, n, ports[label]))
                groups[label] = procs[-1].pid  # its own process group (start_new_session)
                for sid, data in samples[:: max(1, n // SAMPLES)]:  # the timed reads really read
                    got = web_peers.wait_up(ports[label], procs[-1], sid, E2E_READ_KEY[profile])
                    if got != data[E2E_READ_KEY[profile]]:
                        raise AssertionError(f"{label}: a stored session reads back {got!r}")
            runs: dict[str, list[dict[str, Any]]] = {(order := ["densekv", peer])[0]: [], peer: []}
            stats = proc.client()
            for label in order:  # warm-up, not kept
                wrk_run(str(wrk.bins["wrk"]), script, ports[label], jars[label], 2, connections, 1, writes=writes)
            for r in range(rounds):
                for label in order if r % 2 == 0 else order[::-1]:
                    runs[label].append(wrk_run(str(wrk.bins["wrk"]), script, ports[label],
                                               jars[label], seconds, connections, r + 2,
                                               groups[label], proc.proc.pid, stats, writes))
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return {**record, **e2e_summary(runs["densekv"], runs[peer])}


def e2e_summary(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> dict[str, Any]:
    med = statistics.median
    rps = med(r["rps"] for r in ours), med(r["rps"] for r in theirs)
    p99 = med(r["p99_us"] for r in ours), med(r["p99_us"] for r in theirs)
    paired, paired_p99 = ([a[k] / b[k] for a, b in zip(ours, theirs)] for k in ("rps", "p99_us"))
    ratio, p99_ratio = rps[0] / rps[1], p99[0] / p99[1]
    cpu = {f"{who}_{part}_cpu_us": round(med(r[f"{part}_cpu_us"] for r in runs), 1)
           for who, runs in (("densekv", ours), ("peer", theirs)) for part in ("app", "server")}
    cpu["cpu_ratio"] = round((cpu["densekv_app_cpu_us"] + cpu["densekv_server_cpu_us"])
                             / (cpu["peer_app_cpu_us"] + cpu["peer_server_cpu_us"]), 3)
    cpu["app_cpu_ratio"] = round(cpu["densekv_app_cpu_us"] / cpu["peer_app_cpu_us"], 3)
    cpu["redis_cpu_ratio"] = round(cpu["densekv_server_cpu_us"] / cpu["peer_server_cpu_us"], 3)
    return {"met": ratio >= 1.0 and p99_ratio <= 1.0, "densekv_rps": round(rps[0], 1), "peer_rps": round(rps[1], 1),
            "ratio": round(ratio, 3), "ratio_paired": round(med(paired), 3),
            "ratio_paired_range": [round(min(paired), 3), round(max(paired), 3)],
            "densekv_p99_us": round(p99[0]), "peer_p99_us": round(p99[1]),
            "p99_ratio": round(p99_ratio, 3), "p99_ratio_paired": round(med(paired_p99), 3),
            "errors": sum(r["errors"] for r in (*ours, *theirs)), **cpu,
            "densekv_commands": ours[-1].get("commands"), "peer_commands": theirs[-1].get("commands"),
            # a store that trains its dictionary again mid-run (payload_flows.py refit) reads fewer split sessions later on
            "densekv_hmget_by_round": [(r.get("commands") or {}).get("hmget", 0.0) for r in ours],
            "densekv_server_io": ours[-1].get("server_io"), "peer_server_io": theirs[-1].get("server_io"),
            "densekv_rounds": [(r["rps"], r["p99_us"], r["app_cpu_us"]) for r in ours],
            "peer_rounds": [(r["rps"], r["p99_us"], r["app_cpu_us"]) for r in theirs]}


# -- the run: a child process per measurement ----------------------------------------------
def child(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    try:
        if args.child == "memory":
            rec = measure_memory(args.server, args.store, args.profile, args.n[0], args.ttl)
        elif args.child == "e2e":
            rec = measure_e2e(args.server, args.framework, args.e2e_sessions, args.rounds,
                              args.seconds, args.connections, args.ttl, args.e2e_profile, args.e2e_fill,
                              args.e2e_writes)
        else:
            rec = measure_timing(args.server, args.framework, args.timing_sessions,
                                 args.requests, args.rounds, args.ttl)
    except Exception as exc:  # noqa: BLE001 - the record says what failed; the run goes on
        traceback.print_exc()
        rec = {"benchmark": "web_sessions", "part": args.child, "commit": gitstamp.commit(),
               "server": args.server, "store": args.store, "profile": args.profile,
               "n": args.n[0] if args.n else None, "framework": args.framework,
               "error": f"{type(exc).__name__}: {exc}"[:500]}
    if rec.get("part") == "memory":
        rec.setdefault("table_row", ["store", "profile", "n"])
    rec["densekv_digest"] = os.environ.get("WEB_SESSIONS_DIGEST", "live tree")
    rec["commit"] = os.environ.get("WEB_SESSIONS_COMMIT") or rec.get("commit")  # as frozen
    rec["densekv_from"] = str(Path(sys.modules["densekv"].__file__ or "").parent.parent)
    rec["duration_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(rec), flush=True)


def freeze_code() -> tuple[str, str]:
    """Copy densekv/ as it is now to a temporary directory that every child imports first
    (PYTHONPATH), so one run measures one state of the code even while densekv/ is being
    edited; returns (directory, digest of the copied files: `densekv_digest` in records)."""
    import densekv

    source = Path(densekv.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(source.rglob("*")):
        if path.is_file() and not SKIPPED & set(path.parts):
            digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes())
    top = Path(tempfile.mkdtemp(prefix="web_sessions_code_"))
    shutil.copytree(source, top / "densekv", ignore=shutil.ignore_patterns(*SKIPPED))
    return str(top), digest.hexdigest()[:12]


FROZEN: tuple[str, str] | None = None
STAMP: str | None = None  # gitstamp.commit() as frozen, not the live checkout's at each child
SKIPPED = {"__pycache__", ".mypy_cache"}  # not code: neither copied nor in the digest


def spawn(argv: list[str]) -> dict[str, Any]:
    env = dict(os.environ)
    if FROZEN is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (FROZEN[0], env.get("PYTHONPATH"))))
        env["WEB_SESSIONS_DIGEST"], env["WEB_SESSIONS_COMMIT"] = FROZEN[1], STAMP or ""
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv],
                          stdout=subprocess.PIPE, text=True, check=False, env=env)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    return {"benchmark": "web_sessions", "error": f"child {argv} exited {proc.returncode}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, action="append", help="sessions per store (repeatable)")
    ap.add_argument("--quick", action="store_true", help="N=20000, short timing rounds")
    ap.add_argument("--servers", default="valkey-9.1,redis-7.0")
    ap.add_argument("--stores", default=",".join(STORES))
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--parts", default="memory,timing")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--requests", type=int, default=None, help="requests per app per round")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--timing-sessions", type=int, default=None, help="preloaded per store")
    ap.add_argument("--ttl", type=int, default=TTL)
    ap.add_argument("--out", default=None, help="also append the records to this JSONL file")
    ap.add_argument("--e2e-sessions", type=int, default=10_000, help="stored per app (e2e)")
    ap.add_argument("--e2e-profile", default="P1", choices=sorted(E2E_READ_KEY),
                    help="the stored sessions (e2e): P1 Django logins, P1n the same with the key "
                         "the mix writes already in them, P2 Flask-Login")
    ap.add_argument("--e2e-fill", default=None, metavar="F|none",
                    help="densekv's fill (mean sessions per partition at most; e2e): smaller "
                         "listpacks, shorter server scans, more keys; 'none': the densest "
                         "partitions; default: the store's default")
    ap.add_argument("--e2e-writes", type=int, default=E2E_WRITES, metavar="PCT",
                    help="percent of requests that write one key (e2e; the rest read one)")
    ap.add_argument("--seconds", type=int, default=6, help="wrk run per app per round (e2e)")
    ap.add_argument("--connections", type=int, default=None,
                    help="wrk connections (e2e; default: 4 for gunicorn's sync workers, which take "
                         "one request at a time, 16 for uvicorn's, whose connections stay with the "
                         "worker the kernel gave them to)")
    ap.add_argument("--child", choices=("memory", "timing", "e2e"), help=argparse.SUPPRESS)
    ap.add_argument("--server", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--profile", help=argparse.SUPPRESS)
    ap.add_argument("--framework", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not 0 <= args.e2e_writes <= 100:
        ap.error(f"--e2e-writes is a percent, 0 to 100 (got {args.e2e_writes})")
    args.requests = args.requests or (300 if args.quick else 1000)
    args.rounds = args.rounds or (4 if args.quick else 7 if "e2e" in args.parts else 12)
    args.timing_sessions = args.timing_sessions or (5000 if args.quick else 100_000)
    if args.child:
        child(args)
        return
    ns = args.n or ([20_000] if args.quick else [100_000, 1_000_000])
    present = find_servers()
    servers = [s for s in args.servers.split(",") if s]
    missing = [s for s in servers if s not in present]
    if missing:
        sys.exit(f"servers not on this machine: {', '.join(missing)} (scripts/get-servers)")
    common = ["--ttl", str(args.ttl)]
    global FROZEN, STAMP
    STAMP, FROZEN = gitstamp.commit(), freeze_code()
    print(f"web_sessions: densekv {FROZEN[1]} frozen in {FROZEN[0]}", file=sys.stderr)
    started = time.perf_counter()
    try:
        if "memory" in args.parts:
            for server in servers:
                for n in ns:
                    for profile in args.profiles.split(","):
                        ours: float | None = None
                        for store in args.stores.split(","):
                            rec = spawn(["--child", "memory", "--server", server, "--store", store,
                                         "--profile", profile, "--n", str(n), *common])
                            if store == "densekv":
                                ours = rec.get("bytes_per_item")
                            elif ours and rec.get("bytes_per_item"):
                                rec["x_densekv"] = round(rec["bytes_per_item"] / ours, 2)
                            emit(rec, args.out)
        if "timing" in args.parts:
            for server in servers:
                for framework in args.frameworks.split(","):
                    emit(spawn(["--child", "timing", "--server", server, "--framework", framework,
                                "--requests", str(args.requests), "--rounds", str(args.rounds),
                                "--timing-sessions", str(args.timing_sessions), *common]), args.out)
        if "e2e" in args.parts:
            for server in servers:
                for framework in args.frameworks.split(","):
                    emit(spawn(["--child", "e2e", "--server", server, "--framework", framework,
                                "--rounds", str(args.rounds), "--seconds", str(args.seconds),
                                "--connections", str(args.connections or CONNECTIONS[framework]),
                                "--e2e-sessions", str(args.e2e_sessions),
                                "--e2e-profile", args.e2e_profile, "--e2e-writes", str(args.e2e_writes),
                                *(["--e2e-fill", str(args.e2e_fill)] if args.e2e_fill else []), *common]), args.out)
    finally:
        shutil.rmtree(FROZEN[0], ignore_errors=True)
    print(f"web_sessions: {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
