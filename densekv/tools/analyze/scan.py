"""Read-only sampling of a live server: SCAN, then pipelined per-key commands.

The only commands sent to the analyzed server (and so the minimal ACL, docs/analyzer.md):
    connecting      PING; INFO server; INFO cluster; DBSIZE;
                    CLUSTER SLOTS on a cluster (to find every primary)
    sampling        SCAN; per key TYPE, PTTL, OBJECT ENCODING, MEMORY USAGE key SAMPLES 0
    shapes, copies  GET; HLEN HGETALL HSCAN; SCARD SMEMBERS SSCAN; ZCARD ZRANGE; LLEN LRANGE;
                    XLEN; XRANGE (the first SHAPE_SAMPLES keys of a pattern, and the
                    replayed keys: XRANGE only to copy a stream)
Nothing else: no CONFIG, no DEBUG, no KEYS, no write (and, connecting, no HELLO or CLIENT
SETINFO: RESP2 and no library name). Every command goes through wire.py, which refuses a
command name outside READ_COMMANDS before sending anything, so the rule is enforced in
one place (and tests/behaviour/test_analyze.py checks it on the server, with an ACL user
that may run only these and with INFO commandstats).

Counting and sampling. `--sample N` on a server of at most `--names-limit` keys (default
50M): first a names pass - SCAN alone, COUNT 1000, every key's name turned into its
pattern and counted (no per-key command: exact key counts per pattern, at about 5 us of
client time per key), each pattern keeping a uniform reservoir of its names
(table.py); the patterns are merged (merge_similar); then N keys are shared among the
patterns as evenly as their sizes allow (estimate.allocate; each at most its reservoir)
and drawn from the reservoirs (plan_sample, a fixed seed), and only those get the 4
per-key commands and the value reads. A pattern's bytes are then its exact count times
its sample's mean, so a pattern of 3% of the keys is measured as well as one of 30%.
Past the names limit, or with --names-limit lower than DBSIZE, `--sample N` takes the
first N keys SCAN returns (per node: N x its share of DBSIZE): SCAN walks the main
dictionary in bucket order, and a key's bucket is a keyed hash of its name, so a prefix
of the walk is a uniform random sample of the keys (the exception: on servers that keep
one dictionary per cluster slot - Valkey 8+ in cluster mode - the prefix is the node's
first slots, which is uniform for keys without hash tags, and samples keys that share
one hash tag all or nothing); the counts are then estimates with intervals. `--full`
visits every key with the per-key commands. Per batch: one SCAN (or a slice of the
drawn sample), then one pipeline of 4 commands per key, then one pipeline of value reads
for keys whose pattern still needs shape samples. `--rate R` caps the commands per
second (a token bucket across all round trips).

Resuming: after every batch the node cursors and the pattern table can be saved
(ScanState.to_json, written by run.py); a rerun with the same file continues each node
from its cursor. SCAN's guarantee carries over: a key present from the start to the end
of the whole scan is seen at least once (full mode and the names pass may count a key
twice if the server rehashes mid-scan, as SCAN itself may return it twice: keeping every
name to drop them would make the client's memory grow with the keyspace; the prefix
sample drops duplicates). The names pass saves its cursors and table like a full scan;
the drawn sample is redrawn from the saved table and seed, and goes on from its position.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from densekv.connect import describe_failure, first_reply_timeout, redact
from densekv.errors import AnalyzeError
from densekv.errors import ServerUnavailableError as _ServerUnavailableError
from densekv.tools.analyze.estimate import allocate
from densekv.tools.analyze.shapes import MAX_DECODE, Shape, collection_shape, string_shape
from densekv.tools.analyze.table import KeyFacts, PatternStats, PatternTable
from densekv.tools.analyze.wire import (
    READ_COMMANDS,
    command_name,
    denied,
    key_facts_replies,
    roundtrip,
)

__all__ = ["READ_COMMANDS", "Node", "RateLimiter", "ScanState", "Scanner", "Target", "command_name", "open_target",
           "roundtrip"]

SCAN_COUNT = 500  # SCAN COUNT hint per batch
NAMES_COUNT = 1000  # SCAN COUNT hint of the names pass (names only: cheap per key)
NAMES_LIMIT = 50_000_000  # default bound of the names pass (keys); past it, a prefix sample
BIG_VALUE = 1 << 20  # values whose MEMORY USAGE is over this are not read whole
COLLECTION_READ = 64  # members read from a collection too big to read whole
REPLY_TIMEOUT = 10.0  # seconds a reply of the analyzed server may take


class RateLimiter:
    """A token bucket: at most `rate` commands per second on average (None: no limit)."""

    def __init__(self, rate: float | None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rate is not None and rate <= 0:
            raise AnalyzeError("--rate is a positive number of commands per second")
        self.rate = rate
        self.clock, self.sleep = clock, sleep
        self.allowance = float(rate or 0)
        self.last = clock()

    def take(self, n: int) -> None:
        if self.rate is None:
            return
        now = self.clock()
        self.allowance = min(self.rate, self.allowance + (now - self.last) * self.rate)
        self.last = now
        self.allowance -= n
        if self.allowance < 0:
            self.sleep(-self.allowance / self.rate)


# --- the target ---------------------------------------------------------------------------


@dataclass
class Node:
    addr: str
    client: redis.Redis
    keys: int  # DBSIZE when the analysis started
    run_id: str


@dataclass
class Target:
    label: str  # the URL without its password
    flavor: str  # redis | valkey
    version: str
    cluster: bool
    nodes: list[Node]
    db: int

    @property
    def keys(self) -> int:
        return sum(n.keys for n in self.nodes)

    def close(self) -> None:
        for n in self.nodes:
            n.client.close()


def explain(exc: BaseException, label: str, seconds: float = REPLY_TIMEOUT) -> AnalyzeError:
    """A connection or reply error as one line naming the problem (never the password);
    `seconds`: the timeout that ran out, if one did."""
    text = str(exc)
    if isinstance(exc, redis.AuthenticationError) or "WRONGPASS" in text or "NOAUTH" in text \
            or "invalid username-password" in text:
        return AnalyzeError(f"the server at {label} refused the credentials: wrong user name or password "
                            "(or the user is disabled)")
    if denied(exc):
        import re

        found = re.search(r"run the '([^']+)' command", text)
        what = found.group(1) if found else text
        return AnalyzeError(f"the user at {label} may not run a command the analyzer needs ({what}); "
                            "give it the commands of the minimal ACL in docs/analyzer.md")
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)):
        why = describe_failure(label, exc, seconds, hint=": check the URL and that the server runs")
        return _ServerUnavailableError(str(why) if why else
                                       f"nothing answers at {label}: check the URL and that the server runs")
    if isinstance(exc, redis.exceptions.InvalidResponse):
        return _ServerUnavailableError(str(describe_failure(label, exc, seconds)))
    return AnalyzeError(f"the server at {label} refused: {text}")


def _info(client: redis.Redis, section: str) -> dict[str, str]:
    reply = roundtrip(client, [("INFO", section)])[0]
    if isinstance(reply, Exception):
        raise reply
    out: dict[str, str] = {}
    for line in bytes(reply).decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("#"):
            k, _, v = line.partition(":")
            out[k.strip()] = v.strip()
    return out


def open_target(url: str, *, timeout: float = REPLY_TIMEOUT) -> Target:
    """Connect, check the server answers, and find its nodes (every primary of a cluster)."""
    cluster_hint = url.startswith("redis+cluster://")
    if cluster_hint:
        url = "redis://" + url[len("redis+cluster://"):]
    label = redact(url)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise AnalyzeError(f"{label!r} is not a redis:// URL (redis://[user:password@]host:port/db)")
    try:
        # RESP2 (the replies roundtrip parses), and no HELLO or CLIENT SETINFO on connect: the
        # connection sends only READ_COMMANDS (AUTH aside), so the minimal ACL is exact
        seed = redis.Redis.from_url(url, socket_connect_timeout=first_reply_timeout(), socket_timeout=timeout,
                                    protocol=2, **_quiet_handshake())
    except ValueError as exc:
        raise AnalyzeError(f"{label!r} is not a usable URL: {str(exc).replace(url, label)}") from None
    try:
        seed.ping()
        server = _info(seed, "server")
        cluster_info = _info(seed, "cluster")
        db = int(seed.connection_pool.connection_kwargs.get("db", 0) or 0)
        flavor = "valkey" if "valkey_version" in server else "redis"
        version = server.get("valkey_version") or server.get("redis_version", "?")
        if cluster_info.get("cluster_enabled") == "1" or cluster_hint:
            nodes = _cluster_nodes(seed, url)
            seed.close()
        else:
            nodes = [_node(seed, f"{seed.connection_pool.connection_kwargs.get('host', 'unix')}:"
                                 f"{seed.connection_pool.connection_kwargs.get('port', '')}")]
    except (redis.RedisError, OSError) as exc:
        seed.close()
        raise explain(exc, label, timeout) from None
    return Target(label, flavor, version, len(nodes) > 1 or cluster_hint, nodes, db)


def _quiet_handshake() -> dict[str, Any]:
    """Connection options that keep redis-py from sending CLIENT SETINFO on connect."""
    if hasattr(redis, "DriverInfo"):  # redis-py 7+
        return {"driver_info": redis.DriverInfo(name=None, lib_version=None)}
    return {"lib_name": None, "lib_version": None}


def _node(client: redis.Redis, addr: str) -> Node:
    size = roundtrip(client, [("DBSIZE",)])[0]
    if isinstance(size, Exception):
        raise size
    return Node(addr, client, int(size), _info(client, "server").get("run_id", ""))


def _cluster_nodes(seed: redis.Redis, url: str) -> list[Node]:
    slots = roundtrip(seed, [("CLUSTER", "SLOTS")])[0]
    if isinstance(slots, Exception):
        raise slots
    pool = seed.connection_pool
    kwargs = dict(pool.connection_kwargs)
    seen: dict[str, Node] = {}
    for entry in slots:
        host, port = bytes(entry[2][0]).decode(), int(entry[2][1])
        if not host:  # a node that does not know its own address: the seed's host
            host = str(kwargs.get("host", "127.0.0.1"))
        addr = f"{host}:{port}"
        if addr not in seen:
            node_pool = redis.ConnectionPool(connection_class=pool.connection_class,
                                             **{**kwargs, "host": host, "port": port, "db": 0})
            client = redis.Redis.from_pool(node_pool)
            seen[addr] = _node(client, addr)
    return sorted(seen.values(), key=lambda n: n.addr)


# --- scanning -----------------------------------------------------------------------------


@dataclass
class NodeState:
    addr: str
    run_id: str
    keys: int
    quota: int | None  # keys to sample on this node (None: every key)
    cursor: int = 0
    done: bool = False
    taken: int = 0


@dataclass
class ScanState:
    """Where the scan is: what the resume file holds besides the pattern table."""

    mode: str  # "sample" | "full"
    sample: int | None
    nodes: list[NodeState]
    vanished: int = 0  # keys gone between SCAN and TYPE
    commands: int = 0
    elapsed: float = 0.0
    interrupted: bool = False
    seen: dict[str, list[str]] = field(default_factory=dict)  # prefix sample: keys taken (latin-1)
    counted: bool = False  # sample mode with a names pass: counts exact, the sample per pattern
    phase: str = "facts"  # "names" (the names pass), then "facts" (per-key commands)
    named: int = 0  # names counted so far
    planned: int = 0  # keys of the per-pattern sample (plan_sample), once the names pass ended
    plan_at: int = 0  # how many of them were looked at
    seed: int = 13  # the per-pattern sample's draw

    def interrupt(self) -> None:
        """Stopped (Ctrl-C): in the scan, or in the replay after it (run.py)."""
        self.interrupted = True

    @property
    def done(self) -> bool:
        if self.counted:
            return self.phase == "facts" and self.plan_at >= self.planned
        return all(n.done for n in self.nodes)

    @property
    def taken(self) -> int:
        if self.counted:
            return self.named if self.phase == "names" else self.plan_at
        return sum(n.taken for n in self.nodes)

    @property
    def goal(self) -> int:
        if self.counted:
            return sum(n.keys for n in self.nodes) if self.phase == "names" else self.planned
        return sum(n.quota if n.quota is not None else n.keys for n in self.nodes)

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "sample": self.sample, "vanished": self.vanished, "commands": self.commands,
                "elapsed": self.elapsed, "nodes": [n.__dict__ for n in self.nodes], "seen": self.seen,
                "counted": self.counted, "phase": self.phase, "named": self.named, "planned": self.planned,
                "plan_at": self.plan_at, "seed": self.seed}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScanState:
        return cls(data["mode"], data["sample"], [NodeState(**n) for n in data["nodes"]],
                   int(data.get("vanished", 0)), int(data.get("commands", 0)), float(data.get("elapsed", 0.0)),
                   False, {k: list(v) for k, v in data.get("seen", {}).items()}, bool(data.get("counted")),
                   str(data.get("phase", "facts")), int(data.get("named", 0)), int(data.get("planned", 0)),
                   int(data.get("plan_at", 0)), int(data.get("seed", 13)))

    @classmethod
    def start(cls, target: Target, sample: int | None, names_limit: int | None = None,
              seed: int = 13) -> ScanState:
        """sample None: every key; else a names pass when the keyspace has at most
        names_limit keys (None: no limit), and a prefix of SCAN's order past it."""
        total = target.keys
        counted = sample is not None and (names_limit is None or total <= names_limit)
        nodes = []
        for n in target.nodes:
            quota = None
            if sample is not None and not counted:
                quota = min(n.keys, max(1 if n.keys else 0, round(sample * n.keys / total))) if total else 0
            nodes.append(NodeState(n.addr, n.run_id, n.keys, quota, done=(quota == 0)))
        return cls("full" if sample is None else "sample", sample, nodes, counted=counted,
                   phase="names" if counted else "facts", seed=seed)

    def check_target(self, target: Target) -> None:
        """Refuse a resume file written for other nodes (or a restarted server)."""
        mine = {(n.addr, n.run_id) for n in self.nodes}
        theirs = {(n.addr, n.run_id) for n in target.nodes}
        if mine != theirs:
            raise AnalyzeError("the resume file was written for another server (or the server restarted since): "
                               "remove it to start a new analysis")


def _int(reply: Any, default: int = -1) -> int:
    return int(reply) if isinstance(reply, int) else default


def _str(reply: Any) -> str:
    return bytes(reply).decode(errors="replace") if isinstance(reply, (bytes, bytearray)) else ""


def key_facts(client: redis.Redis, keys: Sequence[bytes], node: int, limiter: RateLimiter) -> tuple[list[KeyFacts], int]:
    """TYPE, PTTL, OBJECT ENCODING, MEMORY USAGE SAMPLES 0 for each key, one round trip.
    Returns the facts of keys still there and how many had vanished."""
    limiter.take(4 * len(keys))
    replies = key_facts_replies(client, keys)
    facts, vanished = [], 0
    for i, k in enumerate(keys):
        kind, pttl, enc, mem = replies[4 * i: 4 * i + 4]
        kind_s = _str(kind)
        if kind_s in ("", "none") or pttl == -2:
            vanished += 1
            continue
        facts.append(KeyFacts(bytes(k), kind_s, _int(pttl), _str(enc) or "unknown", max(0, _int(mem, 0)), node))
    return facts, vanished


def shape_reads(f: KeyFacts, whole: bool) -> list[tuple[Any, ...]]:
    """The commands that read a key's value for its shape (or, whole=True, to copy it)."""
    k, big = f.key, f.memory > (BIG_VALUE if whole else MAX_DECODE)
    if f.type == "string":
        return [] if big else [("GET", k)]
    n = str(COLLECTION_READ)
    if f.type == "hash":
        return [("HLEN", k), ("HSCAN", k, "0", "COUNT", n) if big else ("HGETALL", k)]
    if f.type == "set":
        return [("SCARD", k), ("SSCAN", k, "0", "COUNT", n) if big else ("SMEMBERS", k)]
    if f.type == "zset":
        return [("ZCARD", k), ("ZRANGE", k, "0", "-1" if whole and not big else str(COLLECTION_READ - 1), "WITHSCORES")]
    if f.type == "list":
        return [("LLEN", k), ("LRANGE", k, "0", "-1" if whole and not big else str(COLLECTION_READ - 1))]
    if f.type == "stream":
        return [("XLEN", k), ("XRANGE", k, "-", "+")] if whole and not big else [("XLEN", k)]
    return []


def _pairs(reply: Any) -> list[tuple[bytes, bytes]]:
    items = list(reply) if isinstance(reply, list) else []
    return [(bytes(a), bytes(b)) for a, b in zip(items[::2], items[1::2])]


def shape_of(f: KeyFacts, replies: list[Any], pattern: str) -> Shape | None:
    """The value's shape from the replies of shape_reads (None: not read, or gone)."""
    if not replies or any(isinstance(r, Exception) for r in replies):
        return None
    if f.type == "string":
        return None if replies[0] is None else string_shape(bytes(replies[0]), pattern)
    count = _int(replies[0], 0)
    if f.type == "stream" or len(replies) < 2:
        return Shape(f.type, count)
    body = replies[1]
    if f.type in ("hash", "set") and isinstance(body, list) and len(body) == 2 and isinstance(body[1], list):
        body = body[1]  # HSCAN / SSCAN reply: [cursor, items]
    if f.type == "hash":
        pairs = _pairs(body)
        return collection_shape("hash", [a for a, _ in pairs], count, [b for _, b in pairs])
    if f.type == "zset":
        return collection_shape("zset", [a for a, _ in _pairs(body)], count)
    return collection_shape(f.type, [bytes(m) for m in (body or [])], count)


def plan_sample(table: PatternTable, sample: int, seed: int) -> list[tuple[PatternStats, int, bytes]]:
    """The per-pattern sample after a names pass: `sample` keys shared among the patterns
    as evenly as their sizes allow (estimate.allocate), each pattern's drawn from its
    reservoir of names (a uniform sample of its keys), in a random order (so a stopped
    run has looked at every pattern alike). Deterministic for a table and a seed."""
    rng = random.Random(seed)
    patterns = list(table)
    shares = allocate([len(s.reservoir) for s in patterns], sample)
    plan = [(s, node, key) for s, n in zip(patterns, shares) for node, key in rng.sample(s.reservoir, n)]
    rng.shuffle(plan)
    return plan


Progress = Callable[[ScanState], None]


class Scanner:
    """Runs the scan of every node into a PatternTable (see the module docstring)."""

    def __init__(self, target: Target, table: PatternTable, state: ScanState, *,
                 rate: float | None = None, count: int = SCAN_COUNT) -> None:
        self.target, self.table, self.state = target, table, state
        self.limiter = RateLimiter(rate)
        self.count = count

    def run(self, progress: Progress | None = None, stop: Callable[[], bool] | None = None) -> ScanState:
        if self.state.counted:
            return self._counted(progress, stop)
        state = self.state
        started = time.monotonic() - state.elapsed
        for index, (node, ns) in enumerate(zip(self.target.nodes, state.nodes)):
            seen = {k.encode("latin-1") for k in state.seen.get(ns.addr, [])} if ns.quota is not None else set()
            while not ns.done:
                if stop is not None and stop():
                    state.interrupted = True
                    state.elapsed = time.monotonic() - started
                    return state
                self._batch(index, node, ns, seen)
                state.elapsed = time.monotonic() - started
                if ns.quota is not None:
                    state.seen[ns.addr] = [k.decode("latin-1") for k in seen]
                if progress is not None:
                    progress(state)
        state.elapsed = time.monotonic() - started
        return state

    def _batch(self, index: int, node: Node, ns: NodeState, seen: set[bytes]) -> None:
        self.limiter.take(1)
        reply = roundtrip(node.client, [("SCAN", str(ns.cursor), "COUNT", str(self.count))])[0]
        if isinstance(reply, Exception):
            raise reply
        cursor, keys = int(reply[0]), [bytes(k) for k in reply[1]]
        if ns.quota is not None:
            fresh: list[bytes] = []
            for k in keys:
                if k not in seen and ns.taken + len(fresh) < ns.quota:
                    fresh.append(k)
            keys = fresh
        facts, vanished = key_facts(node.client, keys, index, self.limiter) if keys else ([], 0)
        self.state.commands += 1 + 4 * len(keys)
        self.state.vanished += vanished
        wanted: list[tuple[PatternStats, KeyFacts]] = []
        for f in facts:
            stats = self.table.add(f)
            if stats.wants_shape():
                stats.shape_pending += 1
                wanted.append((stats, f))
        self._shapes(node.client, wanted)
        if ns.quota is not None:
            seen.update(f.key for f in facts)
            ns.taken += len(facts)
            # keys that vanished still used up their place in the uniform prefix
            ns.taken += vanished
        else:
            ns.taken += len(facts)
        ns.cursor = cursor
        ns.done = cursor == 0 or (ns.quota is not None and ns.taken >= ns.quota)

    def _shapes(self, client: redis.Redis, wanted: Iterable[tuple[PatternStats, KeyFacts]]) -> None:
        plans = [(stats, f, shape_reads(f, whole=False)) for stats, f in wanted]
        cmds = [c for _, _, cs in plans for c in cs]
        self.limiter.take(len(cmds))
        replies = roundtrip(client, cmds)
        self.state.commands += len(cmds)
        at = 0
        for stats, f, cs in plans:
            stats.shape_pending -= 1
            part, at = replies[at: at + len(cs)], at + len(cs)
            shape = shape_of(f, part, stats.name) if cs else Shape("large" if f.type == "string" else f.type, f.memory)
            if shape is not None:
                stats.add_shape(shape, f.key)

    # -- sample mode under the names bound ------------------------------------------------
    def _counted(self, progress: Progress | None, stop: Callable[[], bool] | None) -> ScanState:
        """Every key counted by name (SCAN only), then the per-pattern sample's facts
        (plan_sample): see the module docstring."""
        state = self.state
        started = time.monotonic() - state.elapsed

        def tick() -> bool:
            state.elapsed = time.monotonic() - started
            if progress is not None:
                progress(state)
            if stop is not None and stop():
                state.interrupted = True
                return True
            return False

        if state.phase == "names":
            for index, (node, ns) in enumerate(zip(self.target.nodes, state.nodes)):
                while not ns.done:
                    self.limiter.take(1)
                    reply = roundtrip(node.client, [("SCAN", str(ns.cursor), "COUNT", str(NAMES_COUNT))])[0]
                    if isinstance(reply, Exception):
                        raise reply
                    keys = reply[1]
                    for k in keys:
                        self.table.count_name(index, bytes(k))
                    state.commands += 1
                    state.named += len(keys)
                    ns.taken += len(keys)
                    ns.cursor = int(reply[0])
                    ns.done = ns.cursor == 0
                    if tick():
                        return state
            # merge before drawing: the per-pattern sample is then uniform in each merged pattern
            self.table.merge_similar()
            state.phase, state.plan_at = "facts", 0
            state.planned = len(plan_sample(self.table, state.sample or 0, state.seed))
            if tick():
                return state
        plan = plan_sample(self.table, state.sample or 0, state.seed)
        while state.plan_at < len(plan):
            chunk = plan[state.plan_at: state.plan_at + self.count]
            by_node: dict[int, list[tuple[PatternStats, bytes]]] = {}
            for stats, at, key in chunk:
                by_node.setdefault(at, []).append((stats, key))
            for at, items in by_node.items():
                client = self.target.nodes[at].client
                facts, vanished = key_facts(client, [k for _, k in items], at, self.limiter)
                owner = {k: st for st, k in items}
                state.commands += 4 * len(items)
                state.vanished += vanished
                wanted: list[tuple[PatternStats, KeyFacts]] = []
                for f in facts:
                    stats = owner[f.key]
                    stats.add(f, self.table.rng, keep=False)
                    if stats.wants_shape():
                        stats.shape_pending += 1
                        wanted.append((stats, f))
                self._shapes(client, wanted)
            state.plan_at += len(chunk)
            if tick():
                return state
        state.elapsed = time.monotonic() - started
        return state
