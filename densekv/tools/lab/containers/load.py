"""The load generator: wrk (Debian's, via scripts/get-components) at a fixed concurrency,
each request carrying the cookie of a random session of the stored set.

Why wrk and not ab (seed 003's tool): ab sends one fixed cookie with every request, so
every request would read the same session, which hides what a container does as it
grows (a directory lookup of one hot file, one cached row). wrk's Lua hooks pick a
different stored session per request (`request()`), count the answers that found no
session (`response()`: a container that loses sessions shows misses, not speed), and stop
after a fixed number of responses (`wrk.thread:stop()`), so a run is a request count,
as ab's -n, with wrk's duration (-d) only a ceiling for slow containers. Latency
percentiles come from wrk's own histogram (microseconds). One wrk thread drives all
connections (plenty at these rates; one core is left for the app).

Without wrk (get-components could not fetch it), `python_load` does the same with
threads and http.client, and every result says which generator measured it.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from densekv.tools.lab.containers.components import find_component
from densekv.tools.lab.containers.config import COOKIE

LUA = r"""
local tokens, answered, limit = {}, 0, 0
misses = 0  -- a global: done() reads it from each thread with thread:get
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  for line in io.lines(args[1]) do
    if #line > 0 then tokens[#tokens + 1] = line end
  end
  limit = tonumber(args[2])
  math.randomseed(tonumber(args[3]))
  io.write("START\n")
  io.stdout:flush()
end

function request()
  local headers = {}
  if #tokens > 0 then
    headers["Cookie"] = "%(cookie)s=" .. tokens[math.random(#tokens)]
  end
  return wrk.format(nil, nil, headers)
end

function response(status, headers, body)
  answered = answered + 1
  if string.sub(body, 1, 4) == "miss" or string.sub(body, 1, 3) == "new" then
    misses = misses + 1
  end
  if limit > 0 and answered == limit then
    io.write("STOP " .. answered .. "\n")
    io.stdout:flush()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local m = 0
  for _, t in ipairs(threads) do m = m + t:get("misses") end
  local e = summary.errors
  io.write(string.format(
    '{"requests": %%d, "duration_us": %%d, "p50_us": %%d, "p90_us": %%d, "p99_us": %%d, "max_us": %%d, ' ..
    '"mean_us": %%.1f, "misses": %%d, "errors": {"connect": %%d, "read": %%d, "write": %%d, "status": %%d, "timeout": %%d}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean, m,
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""


@dataclass
class LoadResult:
    generator: str  # "wrk 4.1.0" or "python"
    path: str
    requests: int
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    misses: int
    errors: int

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"generator": self.generator, "path": self.path, "requests": self.requests,
                "seconds": round(self.seconds, 4), "rps": round(self.rps, 1), "p50_ms": round(self.p50_ms, 3),
                "p90_ms": round(self.p90_ms, 3), "p99_ms": round(self.p99_ms, 3), "misses": self.misses,
                "errors": self.errors}


class LoadGenerator:
    """Runs loads against one app: `run(url_path, requests)`; `start`/`finish` for a load
    that runs while something else happens (housekeeping)."""

    def __init__(self, rundir: Path, tokens: list[str], *, connections: int = 5, seed: int = 3,
                 prefer: str = "wrk") -> None:
        self.rundir = rundir
        self.connections = connections
        self.seed = seed
        self.tokens_file = rundir / "tokens.txt"
        self.tokens_file.write_text("\n".join(tokens) + "\n")
        self.tokens = tokens
        wrk = find_component("wrk") if prefer == "wrk" else None
        self.wrk = wrk.bins["wrk"] if wrk else None
        self.generator = f"wrk {wrk.version}".strip() if wrk else "python"
        self.script = rundir / "load.lua"
        self.script.write_text(LUA % {"cookie": COOKIE})
        self._runs = 0

    def _argv(self, url: str, requests: int, ceiling_s: float) -> list[str]:
        assert self.wrk is not None
        self._runs += 1
        return [str(self.wrk), "-t", "1", "-c", str(self.connections), "-d", f"{max(1, int(ceiling_s + 0.999))}s",
                "--timeout", "30s", "-s", str(self.script), url, "--",
                str(self.tokens_file), str(requests), str(self.seed + self._runs)]

    def run(self, url: str, requests: int, ceiling_s: float = 30.0) -> LoadResult:
        """`requests` requests (0: until ceiling_s) against `url` (app base + path)."""
        if self.wrk is None:
            return python_load(url, self.tokens, requests, ceiling_s, self.connections, self.seed)
        run = _WrkRun(self._argv(url, requests, ceiling_s), self.rundir)
        try:
            run.started(deadline=time.monotonic() + 15)
            if requests:
                run.until_stop(deadline=time.monotonic() + ceiling_s + 15)
            return run.result(self.generator, url)
        finally:
            run.kill()

    def start(self, url: str, ceiling_s: float) -> Any:
        """A load running in the background until finish() (or ceiling_s)."""
        if self.wrk is None:
            box: dict[str, Any] = {"stop": threading.Event()}

            def go() -> None:
                box["result"] = python_load(url, self.tokens, 0, ceiling_s, self.connections, self.seed,
                                            stop=box["stop"])

            box["thread"] = threading.Thread(target=go, daemon=True)
            box["thread"].start()
            return box
        run = _WrkRun(self._argv(url, 0, ceiling_s), self.rundir)
        try:
            run.started(deadline=time.monotonic() + 15)
        except BaseException:
            run.kill()
            raise
        return run

    def finish(self, url: str, handle: Any) -> LoadResult:
        if isinstance(handle, dict):
            handle["stop"].set()
            handle["thread"].join()
            result: LoadResult = handle["result"]
            return result
        try:
            return handle.result(self.generator, url)  # type: ignore[no-any-return]
        finally:
            handle.kill()


class _WrkRun:
    """One wrk process: START when its connections are about to open, STOP n when the
    n-th response arrived (then it is interrupted and prints its summary). The rate is
    n / (STOP - START) on our clock: wrk's own duration would include the rest of -d."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                                     start_new_session=True)
        self.buffer = b""
        self.lines: list[str] = []
        self.t_start: float | None = None
        self.t_stop: float | None = None
        self.answered: int | None = None

    def _read(self, deadline: float) -> bool:
        """Read what wrk printed until `deadline`; False at end of output."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        chunk = os.read(fd, 65536)
        now = time.monotonic()
        if not chunk:
            return False
        self.buffer += chunk
        while b"\n" in self.buffer:
            raw, self.buffer = self.buffer.split(b"\n", 1)
            line = raw.decode(errors="replace").strip()
            if line == "START" and self.t_start is None:
                self.t_start = now
            elif line.startswith("STOP ") and self.t_stop is None:
                self.t_stop, self.answered = now, int(line.split()[1])
            else:
                self.lines.append(line)
        return True

    def started(self, deadline: float) -> None:
        while self.t_start is None:
            if not self._read(deadline) or time.monotonic() >= deadline:
                raise RuntimeError(f"wrk did not start: {self._stderr()}")

    def until_stop(self, deadline: float) -> None:
        """Wait for STOP (or for wrk to end at its -d ceiling)."""
        while self.t_stop is None and time.monotonic() < deadline:
            if not self._read(deadline):
                return

    def result(self, generator: str, url: str) -> LoadResult:
        stopped_at = self.t_stop or time.monotonic()
        interrupted = self.proc.poll() is None
        if interrupted:
            self.proc.send_signal(signal.SIGINT)  # wrk stops and prints its summary
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self._read(deadline):
            pass
        self.proc.wait(30)
        line = next((ln for ln in reversed(self.lines) if ln.startswith("{")), None)
        if line is None:
            raise RuntimeError(f"wrk failed (exit {self.proc.returncode}): {self._stderr()}")
        d = json.loads(line)
        errors = sum(int(v) for v in d["errors"].values())
        if self.answered is not None and self.t_start is not None:
            requests, seconds = self.answered, stopped_at - self.t_start
        elif self.t_start is not None and interrupted:
            requests, seconds = int(d["requests"]), stopped_at - self.t_start  # interrupted by us
        else:
            requests, seconds = int(d["requests"]), d["duration_us"] / 1e6  # ran to its -d ceiling
        return LoadResult(generator, "/" + url.split("/", 3)[-1], requests, seconds, d["p50_us"] / 1e3,
                          d["p90_us"] / 1e3, d["p99_us"] / 1e3, int(d["misses"]), errors)

    def _stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return "(still running)"
        return self.proc.stderr.read().decode(errors="replace").strip()[-300:] or "(no output)"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q / 100 * len(sorted_values)))]


def python_load(url: str, tokens: list[str], requests: int, ceiling_s: float, connections: int, seed: int,
                stop: threading.Event | None = None) -> LoadResult:
    """The fallback generator: `connections` threads, one new connection per request (as
    wrk against gunicorn's sync worker, which closes each one)."""
    host_port, _, path = url.removeprefix("http://").partition("/")
    host, _, port = host_port.partition(":")
    lock = threading.Lock()
    latencies: list[float] = []
    state = {"misses": 0, "errors": 0, "left": requests}
    deadline = time.monotonic() + ceiling_s
    stop = stop or threading.Event()

    def worker(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        while not stop.is_set() and time.monotonic() < deadline:
            with lock:
                if requests and state["left"] <= 0:
                    return
                state["left"] -= 1
            headers = {"Cookie": f"{COOKIE}={rng.choice(tokens)}"} if tokens else {}
            t0 = time.perf_counter()
            try:
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                conn.request("GET", "/" + path, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
                conn.close()
                ok = resp.status < 400
            except OSError:
                ok, body = False, b""
            took = time.perf_counter() - t0
            with lock:
                latencies.append(took)
                if not ok:
                    state["errors"] += 1
                elif body.startswith((b"miss", b"new")):
                    state["misses"] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    lat = sorted(latencies)
    return LoadResult("python", path, len(lat), seconds, _percentile(lat, 50) * 1e3, _percentile(lat, 90) * 1e3,
                      _percentile(lat, 99) * 1e3, state["misses"], state["errors"])
