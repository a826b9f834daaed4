"""Could a session near cache promise "no stale read after the logout returned"? (issue 22)

A near cache serves a session from the worker's memory until the server's tracking
invalidation (CLIENT TRACKING) says its key changed. The strict promise needs the
invalidation to be in worker B's socket by the time worker A's write has returned; the
server queues both replies in the same event-loop turn but writes them to two sockets
independently (docs/near-cache.md cites the source). This measures how often the promise
breaks on one host, and what a hit would save.

Part 1 (`--part window`), per trial: process B tracks a partition hash (HGET of one field,
RESP3 push in-band or REDIRECT to a RESP2 subscriber); process A then modifies the hash
(`hdel`: HDEL of another field, like a logout; `eval`: the same HDEL in a Lua script, as
regenerate and the other scripted writes; `multi`: MULTI HGET HDEL EXEC sent at once, what
SessionStore.destroy sends; `hset`: HSET of another field, like a touch) and, the moment
its reply is parsed, stamps CLOCK_MONOTONIC in shared memory and wakes B (`pipe`: B
blocks on a pipe, an idle worker; `spin`: B busy-waits on the shared memory, the tightest
case). B then polls its invalidation socket with a zero timeout. "stale" counts the
trials in which nothing was readable yet: a near cache would have served the old entry
after the logout had returned. For those, window_us is the time from A's reply to B's
socket turning readable (both clocks are the host's monotonic clock). `--hogs N` runs N
`yes > /dev/null` beside it (killed at the end of the configuration).

Part 2 (`--part cost`): client CPU per read (time.process_time, interleaved blocks) of
SessionStore.get (one HGET round trip) against a near-cache hit (a zero-timeout poll of the
tracking socket, which a cache must do before each hit to apply pending invalidations,
plus a dict lookup), and of the bare poll.

Part 3 (`--part arithmetic`): sessions per partition from densekv.keys.partition_count
(hash-max-listpack-entries 512) and the invalidations a partition sees per second at a
given store-wide write rate; arithmetic, no server.

Usage:
    python benchmarks/near_cache_window.py [--part window,cost,arithmetic]
        [--servers valkey-9.1,redis-7.0] [--trials 5000] [--hogs 0,1]
        >> benchmarks/results/near_cache_window.jsonl
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code

import densekv
from densekv.keys import partition_count

KEY = b"nc:{0}:p"
FIELDS = 300  # sessions in one partition (see the arithmetic part)
VALUE = b"x" * 40  # a dense record with a small payload


def command(*args: bytes | str | int) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Resp:
    """A minimal RESP2/RESP3 reader on a blocking socket: read() -> (is_push, value)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._more()

    def _more(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def _bulk(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._more()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read_any(self) -> tuple[bool, Any]:
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b"(", b","):
            return False, rest
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return False, int(rest)
        if t == b"_":
            return False, None
        if t == b"#":
            return False, rest == b"t"
        if t in (b"$", b"=", b"!"):
            n = int(rest)
            return False, None if n < 0 else self._bulk(n)
        if t in (b"*", b">", b"~", b"%", b"|"):
            n = int(rest)
            if n < 0:
                return False, None
            if t in (b"%", b"|"):
                n *= 2
            items = [self.read_any()[1] for _ in range(n)]
            if t == b"|":  # an attribute precedes the real reply
                return self.read_any()
            return t == b">", items
        raise RuntimeError(f"unexpected RESP type {line!r}")

    def reply(self, pushes: list[Any] | None = None) -> Any:
        """The next reply; push messages met on the way go to `pushes`."""
        while True:
            is_push, value = self.read_any()
            if not is_push:
                return value
            if pushes is None:
                raise RuntimeError(f"unexpected push {value!r}")
            pushes.append(value)

    def call(self, *args: bytes | str | int, pushes: list[Any] | None = None) -> Any:
        self.sock.sendall(command(*args))
        return self.reply(pushes)


def connect(port: int) -> Resp:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Resp(sock)


def readable(sock: socket.socket, timeout_ms: int) -> bool:
    p = select.poll()
    p.register(sock, select.POLLIN)
    return bool(p.poll(timeout_ms))


# shared memory: [0:8] A's reply timestamp (ns), [8:16] go counter (spin mode)
SHM = struct.Struct("<qq")


def reader(port: int, tracking: str, wait: str, shm: mmap.mmap, pipes: dict[str, int]) -> None:
    """Process B: track KEY, wait for A's signal, look at the invalidation socket."""
    data = connect(port)
    if tracking == "inband":
        data.call("HELLO", 3)
        data.call("CLIENT", "TRACKING", "ON")
        inval = data
    else:
        inval = connect(port)
        inval_id = inval.call("CLIENT", "ID")
        inval.sock.sendall(command("SUBSCRIBE", "__redis__:invalidate"))
        inval.reply()
        data.call("CLIENT", "TRACKING", "ON", "REDIRECT", inval_id)
    results = []
    seq = 0
    while os.read(pipes["track_r"], 1) == b"t":
        pushes: list[Any] = []
        data.call("HGET", KEY, b"f0", pushes=pushes)
        if pushes or inval.buf or (inval is not data and readable(inval.sock, 0)):
            raise RuntimeError("an invalidation was pending before the trial")
        seq += 1
        os.write(pipes["ready_w"], b"r")
        if wait == "pipe":
            os.read(pipes["go_r"], 1)
        else:
            while SHM.unpack_from(shm)[1] != seq:
                pass
        checked = time.monotonic_ns()
        stale = not inval.buf and not readable(inval.sock, 0)
        window = None
        if stale:
            if not readable(inval.sock, 5000):
                raise RuntimeError("no invalidation within 5 s")
            window = time.monotonic_ns() - SHM.unpack_from(shm)[0]
        if inval is data:  # the RESP3 push: >2 invalidate [key]
            is_push, value = inval.read_any()
            if not is_push or value[0] != b"invalidate" or value[1] != [KEY]:
                raise RuntimeError(f"expected the invalidation push, got {value!r}")
        else:  # the pubsub message: message __redis__:invalidate [key]
            value = inval.reply()
            if value[0] != b"message" or value[2] != [KEY]:
                raise RuntimeError(f"expected the invalidation message, got {value!r}")
        results.append((stale, window, checked - SHM.unpack_from(shm)[0]))
    with os.fdopen(pipes["out_w"], "w") as out:
        json.dump(results, out)


def writer_steps(write: str, i: int) -> tuple[bytes | None, bytes, int]:
    """(preparing write or None, the timed write, how many replies it returns)."""
    victim = b"f%d" % (1 + i % (FIELDS - 1))
    if write == "hset":
        return None, command("HSET", KEY, victim, VALUE + b"%d" % i), 1
    prep = command("HSET", KEY, victim, VALUE)
    if write == "hdel":
        return prep, command("HDEL", KEY, victim), 1
    if write == "eval":
        return prep, command("EVAL", "return redis.call('HDEL', KEYS[1], ARGV[1])", 1, KEY, victim), 1
    return prep, command("MULTI") + command("HGET", KEY, victim) + command("HDEL", KEY, victim) + command("EXEC"), 4


def run_window(port: int, tracking: str, write: str, wait: str, trials: int) -> list[tuple[bool, int | None, int]]:
    shm = mmap.mmap(-1, SHM.size)
    track_r, track_w = os.pipe()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # B
        code = 0
        try:
            for fd in (track_w, ready_r, go_w, out_r):
                os.close(fd)
            reader(port, tracking, wait, shm, {"track_r": track_r, "ready_w": ready_w, "go_r": go_r,
                                               "out_w": out_w})
        except Exception as e:  # noqa: BLE001 - report it; os._exit skips the parent's cleanup
            print(f"reader: {e!r}", file=sys.stderr)
            code = 1
        os._exit(code)
    for fd in (track_r, ready_w, go_r, out_w):
        os.close(fd)
    a = connect(port)
    for i in range(trials):
        prep, timed, replies = writer_steps(write, i)
        if prep is not None:
            a.sock.sendall(prep)
            a.reply()
        os.write(track_w, b"t")
        if os.read(ready_r, 1) != b"r":
            raise RuntimeError("reader died")
        a.sock.sendall(timed)
        for _ in range(replies):
            a.reply()
        SHM.pack_into(shm, 0, time.monotonic_ns(), i + 1)
        if wait == "pipe":
            os.write(go_w, b"g")
    os.write(track_w, b"e")
    with os.fdopen(out_r) as f:
        raw = f.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not raw:
        raise RuntimeError("the reader failed")
    a.sock.close()
    return [tuple(r) for r in json.loads(raw)]


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def window_records(servers: list[str], trials: int, hogs: list[int]) -> Iterator[dict[str, Any]]:
    for server in servers:
        with densekv.embedded(server) as srv:
            with srv.client() as c:
                c.hset(KEY, mapping={b"f%d" % i: VALUE for i in range(FIELDS)})
            port = srv.process.port  # type: ignore[union-attr]
            for n_hogs in hogs:
                hog = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(n_hogs)]
                try:
                    for tracking in ("inband", "redirect"):
                        for write in ("hdel", "eval", "multi", "hset"):
                            for wait in ("pipe", "spin"):
                                res = run_window(port, tracking, write, wait, trials)
                                windows = [w / 1000 for s, w, _ in res if s and w is not None]
                                signal = [d / 1000 for _, _, d in res]
                                yield {"bench": "near_cache_window", "part": "window", "server": server,
                                       "tracking": tracking, "write": write, "wait": wait, "hogs": n_hogs,
                                       "trials": len(res), "stale": len(windows),
                                       "stale_rate": round(len(windows) / len(res), 5),
                                       "window_us": {"p50": round(pct(windows, 0.5), 1),
                                                     "p90": round(pct(windows, 0.9), 1),
                                                     "max": round(max(windows), 1)} if windows else None,
                                       "signal_us_p50": round(pct(signal, 0.5), 1)}
                finally:
                    for h in hog:
                        h.kill()
                        h.wait()


def cost_records(servers: list[str], rounds: int, ops: int) -> Iterator[dict[str, Any]]:
    for server in servers:
        with densekv.embedded(server) as srv:
            yield cost_one(srv, server, rounds, ops)


def cost_one(srv: Any, server: str, rounds: int, ops: int) -> dict[str, Any]:
    client = srv.client()
    store = densekv.SessionStore(client, namespace="nc", expected_sessions=100_000)
    tokens = [store.create(i, {"role": "user", "n": i}) for i in range(FIELDS)]
    token = tokens[7]
    cache = {token: store.get(token)}
    tracking = connect(srv.process.port)
    tracking.call("HELLO", 3)
    tracking.call("CLIENT", "TRACKING", "ON")
    poller = select.poll()
    poller.register(tracking.sock, select.POLLIN)

    def server_read() -> None:
        for _ in range(ops):
            store.get(token)

    def memory_hit() -> None:
        for _ in range(ops):
            if not poller.poll(0):
                cache.get(token)

    def bare_poll() -> None:
        for _ in range(ops):
            poller.poll(0)

    kinds = {"server_get": server_read, "near_cache_hit": memory_hit, "poll_only": bare_poll}
    cpu: dict[str, list[float]] = {k: [] for k in kinds}
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(rounds):  # interleaved: every kind once per round
        for name, fn in kinds.items():
            c0, w0 = time.process_time_ns(), time.perf_counter_ns()
            fn()
            cpu[name].append((time.process_time_ns() - c0) / ops / 1000)
            wall[name].append((time.perf_counter_ns() - w0) / ops / 1000)
    tracking.sock.close()
    client.close()
    med = {k: sorted(v)[len(v) // 2] for k, v in cpu.items()}
    return {"bench": "near_cache_window", "part": "cost", "server": server, "layout": store.layout,
            "rounds": rounds, "ops": ops,
            "client_cpu_us": {k: round(v, 3) for k, v in med.items()},
            "wall_us": {k: round(sorted(v)[len(v) // 2], 3) for k, v in wall.items()},
            "hit_vs_get_cpu": round(med["near_cache_hit"] / med["server_get"], 4)}


def arithmetic_records() -> Iterator[dict[str, Any]]:
    for n in (100_000, 1_000_000, 10_000_000):
        p = partition_count(n, 512)
        per = n / p
        for writes_per_s in (100, 1000, 10000):
            rate = writes_per_s / p  # invalidations per partition per second (uniform writes)
            # a session read r times a second stays cached for Exp(rate) seconds after each miss:
            # hit ratio r / (r + rate) for Poisson reads and writes
            yield {"bench": "near_cache_window", "part": "arithmetic", "sessions": n, "partitions": p,
                   "sessions_per_partition": round(per, 1), "store_writes_per_s": writes_per_s,
                   "invalidations_per_partition_per_s": round(rate, 4),
                   "mean_entry_life_s": round(1 / rate, 2),
                   "hit_ratio_at_1_read_per_s": round(1 / (1 + rate), 3),
                   "hit_ratio_at_0.1_read_per_s": round(0.1 / (0.1 + rate), 3),
                   "per_session_key_entry_life_s_at_touch_every_900s": 900}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--part", default="window,cost,arithmetic")
    ap.add_argument("--servers", default="valkey-9.1,redis-7.0")
    ap.add_argument("--trials", type=int, default=5000)
    ap.add_argument("--hogs", default="0,1")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ops", type=int, default=20000)
    args = ap.parse_args()
    parts = args.part.split(",")
    servers = args.servers.split(",")
    stamp = {"commit": gitstamp.commit(), "host_cpus": os.cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    gens: list[Iterator[dict[str, Any]]] = []
    if "arithmetic" in parts:
        gens.append(arithmetic_records())
    if "cost" in parts:
        gens.append(cost_records(servers, args.rounds, args.ops))
    if "window" in parts:
        gens.append(window_records(servers, args.trials, [int(h) for h in args.hogs.split(",")]))
    for gen in gens:
        for rec in gen:
            print(json.dumps({**rec, **stamp}), flush=True)


if __name__ == "__main__":
    main()
