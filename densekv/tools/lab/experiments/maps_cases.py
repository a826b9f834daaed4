"""The maps experiment's story (seed 004): its cases (ids and values), its configurations
(plain SET, plain SET with zipped keys, CompactMap with each codec), how many items each
case loads in a run, and how each configuration stores, reads back and reloads an item
(replay, for benchmarks/lab_check.py). The measuring is in maps.py, the plots in
maps_plots.py."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from densekv.errors import NotReplayable
from densekv.tools.lab.experiments.base import Replay, record_settings
from densekv.tools.lab.sizing import Sizing
from densekv.tools.lab.workloads import DEFAULT_SEED, chunks, html, ints, json_objects, strings8
from densekv.tools.measure import Point

PREFIX = "allBooksBelongToUser:"  # the seed's keys (set-allBooksBelongToUser:id)
ALIASES = {"allBooksBelongToUser": "b"}
NAMESPACE = "lab"
HOLEY_RANGE = 10**8
LOAD_BATCH = 2000
BATCH = 1000
OPS = 1000
MIN_ITEMS = 100
DICT_SIZE = 4096
TRAIN_SAMPLES = {"json": 1000, "html": 300}
ENCODING_SAMPLE = 32
MEMORY_SAMPLE = 32  # keys whose MEMORY USAGE is read (the cross-check)

#: items of a case = N // share (at least MIN_ITEMS, at most N)
SHARES = {"int_holey": 10, "int_seq": 10, "str8": 10, "html": 50, "json": 25}


@dataclass(frozen=True)
class Case:
    name: str
    describe: str
    holey: bool
    values: Callable[[int, int], Iterator[Any]]


CASES: dict[str, Case] = {c.name: c for c in (
    Case("int_holey", "random integers below 2^31 under holey ids (distinct, spread over 0..10^8)", True, ints),
    Case("int_seq", "random integers below 2^31 under sequential ids 0..n-1", False, ints),
    Case("str8", "random 8-character alphanumeric strings under holey ids", True, strings8),
    Case("html", "HTML-like text of 200-1500 bytes under sequential ids", False, html),
    Case("json", "JSON objects of one schema (80-200 bytes) under sequential ids", False, json_objects),
)}


@dataclass(frozen=True)
class Config:
    case: str
    layout: str  # plain | plain-zipped | map
    codec: str | None = None  # map codec: int, raw, msgpack, zlib, lz4, zstd, zstd+dict

    @property
    def label(self) -> str:
        if self.layout == "map":
            return f"{self.case} · map {self.codec}"
        return f"{self.case} · {self.layout.replace('-', ' ')} SET"

    @property
    def short(self) -> str:
        return f"map {self.codec}" if self.layout == "map" else self.layout.replace("-", " ")


#: every configuration of the story (each case's plain SET and its best map first)
PLAN: tuple[Config, ...] = (
    Config("int_holey", "plain"), Config("int_holey", "map", "int"),
    Config("int_seq", "plain"), Config("int_seq", "map", "int"),
    Config("str8", "plain"), Config("str8", "map", "raw"),
    Config("json", "plain"), Config("json", "map", "zstd+dict"), Config("json", "map", "raw"),
    Config("html", "plain"), Config("html", "map", "zlib"), Config("html", "map", "zstd+dict"),
    Config("int_holey", "plain-zipped"), Config("str8", "plain-zipped"),
    Config("json", "map", "msgpack"), Config("json", "map", "zlib"), Config("json", "map", "lz4"),
    Config("html", "map", "raw"), Config("html", "map", "lz4"),
    Config("json", "map", "zstd"),
)


def items_for(case: str, n: int, override: dict[str, int] | None = None, scale: float = 1.0) -> int:
    if override and case in override:
        return int(override[case])
    return max(min(n, MIN_ITEMS), int(n * scale) // SHARES[case])


#: reference seconds (pace 1, see densekv/tools/lab/pace.py; fitted on valkey 9.1, 2 cores) of
#: one configuration: FIXED (flush, readings, samples) + ITEM[case] x items + OP x operations
COST_FIXED_S = 0.35
COST_ITEM_S = {"int_holey": 9e-6, "int_seq": 9e-6, "str8": 9e-6, "html": 60e-6, "json": 25e-6}
COST_OP_S = 12e-6
SCALES = (1.0, 0.6, 0.4, 0.25)


def sizings(n: int, ops: int = OPS) -> list[Sizing]:
    """Largest first: the items of SHARES, then fewer items per case, fewer operations."""
    out = []
    for scale in SCALES:
        for o in dict.fromkeys((ops, ops // 2)):
            trimmed = ([f"{scale:.0%} of the items per case"] if scale < 1 else []) + (
                [f"{o:,} gets and sets of {ops:,}"] if o < ops else [])
            out.append(Sizing(int(n * scale), {"ops": o, "scale_pct": int(scale * 100)}, ", ".join(trimmed)))
    return out


def config_cost(config: Config, items: int, ops: int) -> float:
    return COST_FIXED_S + COST_ITEM_S[config.case] * items + COST_OP_S * 2 * min(ops, items)


def ids(case: Case, n: int, seed: int = DEFAULT_SEED) -> Iterator[int]:
    """Sequential ids, or distinct holey ones: one random id in each of n equal slices of
    0..max(10^8, 10 n) - a stream, spread like a random sample, no two alike."""
    if not case.holey:
        yield from range(n)
        return
    rng = random.Random(seed + 1)
    stride = max(HOLEY_RANGE, 10 * n) // n
    for i in range(n):
        yield i * stride + rng.randrange(stride)


def dataset(case_name: str, n: int, seed: int = DEFAULT_SEED) -> Iterator[tuple[str, Any]]:
    """(key, value) pairs of a case, streamed; values as the generator yields them."""
    case = CASES[case_name]
    for i, v in zip(ids(case, n, seed), case.values(n, seed)):
        yield f"{PREFIX}{i}", v


def codec_available(codec: str) -> str | None:
    """None if usable, else why not."""
    from densekv.codec import Codec
    from densekv.errors import CodecUnavailable

    name = codec.removesuffix("+dict")
    if name not in ("zstd", "lz4"):
        return None
    try:
        Codec.named(name)
    except CodecUnavailable as exc:
        return str(exc)
    return None


@dataclass
class Result:
    config: Config
    n: int
    point: Point | None = None
    ops: dict[str, dict[str, Any]] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def measured(self, point: Point) -> None:
        """The memory the load took, measured once it ended."""
        self.point = point


def warm_up(client: Any, zstd: bool) -> None:
    """The experiment's warm-up on `client` (the caller flushes after it): the Lua engine
    started and the map scripts cached by one small CompactMap."""
    from densekv.maps import CompactMap

    m = CompactMap(client, "labwarm", codec="zstd" if zstd else "raw", expected=100).open()
    if zstd:
        m.train(list(json_objects(100, DEFAULT_SEED + 9)), size=1024)
    m.set("warm:1", "x")


def open_map(client: Any, config: Config, n: int) -> Any:
    """The CompactMap a map configuration measures (its zstd dictionary trained and stored)."""
    from densekv.maps import CompactMap

    codec = (config.codec or "raw").removesuffix("+dict")
    m = CompactMap(client, NAMESPACE, codec=codec, expected=n).open()
    if config.codec == "zstd+dict":
        case = CASES[config.case]
        m.train(list(case.values(TRAIN_SAMPLES[config.case], DEFAULT_SEED + 7)), size=DICT_SIZE)
    return m


def stored_key(config: Config, key: str, aliases: Any = None) -> str:
    """The key as a configuration stores it (zipped for plain-zipped)."""
    from densekv.maps.zipkeys import Aliases, zip_key

    if config.layout != "plain-zipped":
        return key
    return zip_key(key, aliases if aliases is not None else Aliases(ALIASES))


def stored_value(config: Config, v: Any) -> Any:
    """The value as a configuration sends it (JSON parsed for msgpack; text for plain SET)."""
    if config.layout == "map":
        return json.loads(v) if config.codec == "msgpack" else v
    return str(v) if isinstance(v, int) else v


def replay(record: Mapping[str, Any]) -> Replay:
    """A maps record's load, to run again on a fresh server (benchmarks/lab_check.py).

    warm_up is the experiment's own (the Lua engine and the map scripts, zstd where the
    package is present); load stores the record's case (dataset(), default seed, the
    record's n items) as its configuration does: one CompactMap opened (and its zstd
    dictionary trained) in the load, as in the lab, LOAD_BATCH items per batch, or plain
    SETs LOAD_BATCH per pipeline."""
    params = dict(record.get("params") or {})
    try:
        config = Config(str(params["case"]), str(params["layout"]), params.get("codec_name"))
    except KeyError as exc:
        raise NotReplayable(f"maps record without params.{exc.args[0]}") from None
    if config.case not in CASES:
        raise NotReplayable(f"unknown maps case {config.case!r}")
    n = int(record["n"])

    def load(client: Any) -> None:
        from densekv.maps.zipkeys import Aliases

        aliases = Aliases(ALIASES)
        m = open_map(client, config, n) if config.layout == "map" else None
        for chunk in chunks(dataset(config.case, n), LOAD_BATCH):
            if m is not None:
                b = m.batch()
                for k, v in chunk:
                    b.set(k, stored_value(config, v))
                b.execute()
            else:
                pipe = client.pipeline(transaction=False)
                for k, v in chunk:
                    pipe.set(stored_key(config, k, aliases), stored_value(config, v))
                pipe.execute()

    return Replay(n, load, lambda client: warm_up(client, zstd=codec_available("zstd") is None),
                  record_settings(record))


def as_read(got: Any, config: Config) -> Any:
    """What a read gives back, in the generator's terms (plain SET reads bytes)."""
    if config.layout == "map":
        if config.codec == "msgpack" and isinstance(got, dict):
            return json.dumps(got, separators=(",", ":"))
        return got
    if isinstance(got, bytes):
        text = got.decode()
        return int(text) if config.case.startswith("int") else text
    return got
