"""How a planned layout spreads over the masters of a cluster. Pure: no I/O but `read_ranges`.

Every key of a partition carries the partition's hash tag (densekv/keys.py), so a
partition lives on one slot and the master that owns that slot holds all of its bytes.
Sessions and sets tag a partition with its decimal number (`{17}`: the slot depends on
the number only, not on the namespace); a map's numeric bucket b of keys `item:<n>` is
tagged with b in base62, padded, then the zipped prefix (densekv/maps/buckets.py locate).
Items are spread evenly over partitions (at random, or in turn for a map), so a master's
expected bytes are the plan's total times its share of the partitions, and the imbalance
is the fullest master's share over the mean share: 1.0 is a perfect spread, 1.2 means one
master holds 20% more than the average (and fills up first). Slots come from redis-py's
key_slot (CRC16 mod 16384); the masters' slot ranges are an even split (as
densekv.tools.server.cluster.slot_ranges and `redis-cli --cluster create` make them) or what
CLUSTER SLOTS says of a real cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from redis.crc import REDIS_CLUSTER_HASH_SLOTS as SLOTS
from redis.crc import key_slot

from densekv.errors import PlannerError

#: a master's slots: inclusive (start, end) ranges
Ranges = Sequence[Sequence[tuple[int, int]]]
TARGET = 1.05  # the imbalance advice aims under
ADVISE_OVER = 1.10  # imbalance above this gets advice
MAX_PARTITIONS = 1 << 22  # the advice search stops here


def check_masters(masters: Any) -> int:
    if isinstance(masters, bool) or not isinstance(masters, int) or not 1 <= masters <= SLOTS:
        raise PlannerError(f"masters is a whole number from 1 to {SLOTS}")
    return masters


def even_ranges(masters: int) -> list[list[tuple[int, int]]]:
    """The 16384 slots split into `masters` contiguous ranges (one each)."""
    from densekv.tools.server.cluster import slot_ranges

    return [[r] for r in slot_ranges(check_masters(masters))]


def _owners(ranges: Ranges) -> list[int]:
    """Slot -> index of its master; PlannerError unless every slot has exactly one."""
    owner = [-1] * SLOTS
    for m, rs in enumerate(ranges):
        for start, end in rs:
            if not 0 <= start <= end < SLOTS:
                raise PlannerError(f"slot range {start}-{end} is not within 0-{SLOTS - 1}")
            for s in range(start, end + 1):
                if owner[s] != -1:
                    raise PlannerError(f"slot {s} has two masters")
                owner[s] = m
    if -1 in owner:
        raise PlannerError(f"slot {owner.index(-1)} has no master (the cluster is not fully covered)")
    return owner


def map_tag(bucket: int, buckets: int) -> bytes:
    """The hash tag of numeric bucket `bucket` of the planner's map (keys `item:<n>`)."""
    from densekv.maps.zipkeys import ALPHABET, base62, zip_key

    width = len(base62(buckets - 1))
    return (base62(bucket).rjust(width, ALPHABET[0]) + zip_key("item:")).encode()


def tag_of(kind: str, partition: int, partitions: int) -> bytes:
    """The hash tag (the text inside the braces) of partition `partition` of `kind`."""
    if kind == "map":
        return map_tag(partition, partitions)
    return b"%d" % partition


def slots_of(kind: str, partitions: int) -> list[int]:
    """The slot of every partition of a `kind` layout with `partitions` partitions."""
    if partitions < 1:
        raise PlannerError("partitions >= 1")
    return [key_slot(b"{" + tag_of(kind, p, partitions) + b"}") for p in range(partitions)]


def counts(slots: Sequence[int], ranges: Ranges) -> list[int]:
    """Partitions per master, for partitions on `slots`."""
    owner = _owners(ranges)
    out = [0] * len(ranges)
    for s in slots:
        out[owner[s]] += 1
    return out


def imbalance(per_master: Sequence[int | float]) -> float:
    """Fullest master's share over the mean share (1.0: perfectly even)."""
    total = sum(per_master)
    if not per_master or total <= 0:
        raise PlannerError("no partitions to spread")
    return max(per_master) * len(per_master) / total


def partitions_under(kind: str, ranges: Ranges, start: int, target: float = TARGET) -> int | None:
    """The smallest of start*2, start*4, ... whose imbalance is <= target (None: none up
    to MAX_PARTITIONS). Sessions need powers of two; doubling keeps them so."""
    owner = _owners(ranges)
    p = start * 2
    while p <= MAX_PARTITIONS:
        got = [0] * len(ranges)
        for s in slots_of(kind, p):
            got[owner[s]] += 1
        if imbalance(got) <= target:
            return p
        p *= 2
    return None


@dataclass(frozen=True)
class ClusterSpread:
    """Where a plan's partitions and bytes land on M masters (`Recommendation.cluster`)."""

    masters: int
    slot_source: str  # "even split" | "CLUSTER SLOTS of <target>"
    slot_ranges: list[list[tuple[int, int]]]
    partitions: int
    partitions_per_master: list[int]
    bytes_per_master: list[int]
    imbalance: float
    better_partitions: int | None = None  # imbalance <= TARGET from this count (None: not needed/found)
    advice: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def spread(kind: str, partitions: int, total_bytes: float, *, masters: int | None = None,
           ranges: Ranges | None = None, source: str = "even split") -> ClusterSpread:
    """Partitions and expected bytes per master, and the imbalance (see module doc).
    `ranges` (each master's slot ranges) wins over `masters` (an even split)."""
    if ranges is None:
        if masters is None:
            raise PlannerError("give masters or slot ranges")
        ranges = even_ranges(masters)
    ranges = [sorted((int(a), int(b)) for a, b in rs) for rs in ranges]
    if not ranges:
        raise PlannerError("a cluster has at least one master")
    got = counts(slots_of(kind, partitions), ranges)
    ratio = imbalance(got)
    better, advice = None, ""
    if ratio > ADVISE_OVER:
        better = partitions_under(kind, ranges, partitions)
        if better is None:
            advice = (f"imbalance {ratio:.2f}: no partition count up to {MAX_PARTITIONS:,} brings it "
                      f"under {TARGET}")
        else:
            advice = (f"imbalance {ratio:.2f}: the fullest master holds {ratio - 1:.0%} more than the mean; "
                      f"{better} partitions bring it to {TARGET} or less (more, smaller partitions: "
                      "more keys to pay for)")
    return ClusterSpread(
        masters=len(ranges), slot_source=source, slot_ranges=[list(rs) for rs in ranges],
        partitions=partitions, partitions_per_master=got,
        bytes_per_master=[round(total_bytes * n / partitions) for n in got],
        imbalance=round(ratio, 4), better_partitions=better, advice=advice)


def read_ranges(client: Any) -> list[list[tuple[int, int]]] | None:
    """Each master's slot ranges from CLUSTER SLOTS (grouped by master address, in order of
    first slot); None if the server is not a cluster."""
    import redis

    try:
        if isinstance(client, redis.RedisCluster):
            node = client.get_default_node().redis_connection  # type: ignore[no-untyped-call]
            reply = node.execute_command("CLUSTER", "SLOTS") if node is not None else None
        else:
            reply = client.execute_command("CLUSTER", "SLOTS")
    except redis.ResponseError:  # "cluster support disabled"
        return None
    if not reply:
        return None
    by_master: dict[str, list[tuple[int, int]]] = {}
    items = reply.items() if isinstance(reply, dict) else ((tuple(r[:2]), r[2]) for r in reply)
    for (start, end), master in items:
        if isinstance(master, dict):
            master = master.get("primary") or master.get("master")
        host, port = master[0], master[1]
        host = host.decode() if isinstance(host, bytes) else str(host)
        by_master.setdefault(f"{host}:{int(port)}", []).append((int(start), int(end)))
    return sorted((sorted(rs) for rs in by_master.values()), key=lambda rs: rs[0][0])
