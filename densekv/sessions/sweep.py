"""Work over every partition of a session store: sweep, repartition, sizes and counts.

Sweeper is the one owner of this work's state, the sweep's cursors (SessionCore holds it
as `core.sweeper`; only this class changes them); its methods are the flows:
  * sweep walks the partitions SWEEP_BATCH per round trip from its cursor (a bounded
    sweep carries on where the last one stopped), removes what expired (a script per
    partition), then the out-of-line payloads and the identity-index entries of what it
    removed, then index entries past their absolute expiry;
  * repartition grows the partition count online (one split script per old partition,
    resumable) between the metadata's "begin" and "finish";
  * partition_counts / partition_sizes / count count each partition's entries and
    continuation fields (lua/part_len.lua; while a repartition runs, the old
    partitions' leftovers are added to their first child); count_keys counts a
    one-key-per-session layout's keys with a SCAN (flows.Scan: every primary of a
    cluster), its namespace escaped for the MATCH pattern.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from densekv.errors import DensekvError, InvalidArgument
from densekv.flows import Flow, Scan
from densekv.keys import glob_escape, key
from densekv.lua import script
from densekv.plan import Plan, command, script_call
from densekv.sessions.index import IdentityIndex
from densekv.sessions.layouts.base import Partitioned
from densekv.sessions.meta import Metadata, plan_meta
from densekv.sessions.model import Identity, Record

SWEEP_BATCH = 64  # partitions per round trip


class Sweeper:
    """Work over every partition of one store, and where its sweep got to: the two cursors
    (sessions, index) a bounded sweep carries on from. SessionCore holds one
    (`core.sweeper`); only this class changes its cursors. It reads the layout and the
    namespace from the store's meta.Metadata, which it tells of a repartition's begin and
    finish (adopt), and reports what it removes through `emit_removed` (SessionCore's)."""

    def __init__(self, metadata: Metadata, index: IdentityIndex | None, now: Callable[[], int],
                 emit_removed: Callable[..., None]) -> None:
        """`now`: the store's clock (unix seconds)."""
        self.metadata = metadata
        self.index = index
        self.now = now
        self.emit_removed = emit_removed
        self.sweep_cursor = 0  # the next sweep unit (partition) a sweep starts from
        self.index_cursor = 0  # ... and the next index partition

    @property
    def stream(self) -> int | None:
        """The event stream's cap, None without one (expiries are announced there before a
        sweep removes them): the namespace's lifecycle options as the metadata holds them."""
        return self.metadata.life.stream

    def repartition(self, partitions: int, progress: Callable[[int, int], None] | None,
                    refresh: Callable[[], Flow[bool]]) -> Flow[dict[str, Any]]:
        """Move the store to `partitions` (a larger power of two), online: split every old
        partition (a script each); writers that still use the old count meet a tombstone,
        re-read the metadata and follow. Resumable: rerun it after a crash. `refresh`: the
        store's metadata re-read (SessionCore.refresh), first."""
        if self.metadata.layout.partitioning() is None:
            raise InvalidArgument(f"layout {self.metadata.layout.name} has no partitions to grow")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1 \
                or partitions & (partitions - 1):
            raise InvalidArgument(f"{partitions!r} partitions: the new partition count is a power of two")
        yield from refresh()
        layout = self.partitioned()
        if layout.from_partitions is None:
            if partitions == layout.partitions:  # a rerun after it finished: nothing to do
                return {"partitions": layout.partitions, "moved": 0, "note": "already at that count"}
            if not layout.partitions < partitions <= layout.partitions * 256:
                raise InvalidArgument(
                    f"{partitions} partitions: the store has {layout.partitions} and only grows, "
                    f"to a power of two from {layout.partitions * 2} to {layout.partitions * 256}"
                )
            meta = (yield [plan_meta(self.metadata.namespace, "begin", layout.partitions, partitions)])[0]
            self.metadata.adopt(meta)
            layout = self.partitioned()
            if layout.from_partitions is None:
                raise DensekvError("another process changed the partition count first; try again")
        elif partitions != layout.partitions:
            raise DensekvError(
                f"a repartition to {layout.partitions} is under way; finish it first (run it again "
                f"with partitions={layout.partitions})"
            )
        olds = list(range(layout.from_partitions))
        moved = 0
        for i in range(0, len(olds), SWEEP_BATCH):
            moved += sum((yield [layout.plan_split(p) for p in olds[i : i + SWEEP_BATCH]]))
            if progress is not None:
                progress(min(i + SWEEP_BATCH, len(olds)), len(olds))
        meta = (yield [plan_meta(self.metadata.namespace, "finish", layout.partitions)])[0]
        self.metadata.adopt(meta)
        return {"partitions": self.metadata.layout.partitions, "moved": moved}

    def sweep(self, max_items: int | None) -> Flow[int]:
        """Remove expired sessions partition by partition, then identity-index entries past
        their absolute expiry. max_items=None: a full pass over both; otherwise stop near
        max_items removals and sweep one batch of index partitions (cursors carry on)."""
        units = list(self.metadata.layout.sweep_units())
        removed_total = 0
        budget = max_items if max_items is not None else float("inf")
        if units:
            visited = 0
            while visited < len(units) and removed_total < budget:
                batch = [units[(self.sweep_cursor + i) % len(units)] for i in range(min(SWEEP_BATCH, len(units) - visited))]
                now = self.now()
                # share what is left of the budget among this round trip's partitions
                left = budget - removed_total
                limit = 1 << 30 if max_items is None else max(1, -(-int(left) // len(batch)))
                announced = self.stream is not None
                if announced:  # the event stream hears of an expiry before it is removed
                    yield from self.announce(batch, now, limit)
                results = yield from self.run_on_units(batch, [self.metadata.layout.plan_sweep(u, now, limit) for u in batch])
                self.sweep_cursor = (self.sweep_cursor + len(batch)) % len(units)
                visited += len(batch)
                gone: list[Record] = [r for rs in results for r in rs]
                removed_total += len(gone)
                for r in gone:  # the script removed only what had expired by `now`
                    self.emit_removed(r, "", "sweep", now, stream=not announced)
                cleanup: list[Plan[Any]] = self.metadata.layout.plan_drop_outside(gone)
                if self.index is not None and gone:
                    by_identity: dict[Identity, list[bytes]] = {}
                    for r in gone:
                        if r.identity is not None:
                            by_identity.setdefault(r.identity, []).append(r.digest)
                    cleanup += [self.index.plan_remove(i, ds) for i, ds in by_identity.items()]
                if cleanup:
                    yield cleanup
        if self.index is not None:
            # a full pass visits every index partition; a bounded one, one batch of them
            parts = list(self.index.units())
            todo = len(parts) if max_items is None else min(SWEEP_BATCH, len(parts))
            for i in range(0, todo, SWEEP_BATCH):
                now = self.now()
                batch = [parts[(self.index_cursor + i + j) % len(parts)] for j in range(min(SWEEP_BATCH, todo - i))]
                yield [self.index.plan_sweep(p, now) for p in batch]
            self.index_cursor = (self.index_cursor + todo) % len(parts)
        return removed_total

    def announce(self, batch: list[int], now: int, limit: int) -> Flow[None]:
        """XADD to the event stream the expiries that a sweep of `batch` at `now` will remove
        (a dry run of the same script first): a sweep killed after this and before its removal
        announces them again next time (at least once), never after a removal it did not tell."""
        from densekv.sessions.events import SessionEvent, plan_publish

        dry = yield from self.run_on_units(batch, [self.metadata.layout.plan_sweep(u, now, limit, dry=True) for u in batch])
        events = [SessionEvent("expired", r.digest.hex(), r.identity,
                               "idle" if r.expires_at < r.absolute_at else "absolute", now, None, "sweep")
                  for rs in dry for r in rs]
        assert self.stream is not None
        if events:
            yield plan_publish(self.metadata.namespace, self.stream, events)

    def run_on_units(self, units: list[int], plans: list[Plan[Any]]) -> Flow[list[Any]]:
        """Partition-wide plans (sweep), after splitting their parents while migrating."""
        splits: list[Plan[Any]] = self.metadata.layout.plan_unit_splits(units)
        results = yield [*splits, *plans]
        return results[len(splits):]

    def partitioned(self) -> Partitioned:
        """The core's layout as partitions (a flow over partitions asks for them)."""
        parts = self.metadata.layout.partitioning()
        if parts is None:
            raise InvalidArgument(f"layout {self.metadata.layout.name} has no partitions")
        return parts

    def partition_counts(self) -> Flow[list[tuple[int, int]]]:
        """(listpack entries, continuation fields) of every partition hash (lua/part_len.lua:
        expired-but-unswept sessions included; sessions = entries - continuations); while a
        repartition runs, each new partition counts what its parent still holds for it only
        once the parent is split, so the parents' counts are added to the first child."""
        layout = self.partitioned()
        levels = [(layout.bits, layout.partitions)]
        if layout.from_bits is not None:
            levels.append((layout.from_bits, layout.from_partitions or 0))
        every = [(layout.key_at("sd", p, bits), bits % 8, 16 - bits // 8) for bits, n in levels for p in range(n)]
        counted: list[tuple[int, int]] = []
        for i in range(0, len(every), 512):
            counted += (yield [script_call(script("part_len"), (k,), (rest, flen), _pair)
                               for k, rest, flen in every[i : i + 512]])
        sizes = counted[: layout.partitions]
        if layout.from_bits is not None:
            shift = layout.bits - layout.from_bits
            for p, (entries, conts) in enumerate(counted[layout.partitions :]):
                e, c = sizes[p << shift]
                sizes[p << shift] = (e + entries, c + conts)
        return sizes

    def partition_sizes(self) -> Flow[list[int]]:
        """Sessions in every partition (partition_counts: entries less continuation fields)."""
        return [e - c for e, c in (yield from self.partition_counts())]

    def outside_counts(self, counts: list[tuple[int, int]] | None = None) -> Flow[tuple[int, int]]:
        """(split, out of line): sessions of a partitioned store whose payload did not fit
        hash-max-listpack-value, counted as continuation fields (partition_counts) and entries
        of the separate continuation hashes of densekv 0.1.0's layout (HLEN, old and new levels while a
        repartition runs), and out-of-line keys (a SCAN under the namespace's prefix: every
        key of the database is visited once, as count() does for the key-per-session
        layouts). Expired-but-unswept ones included. `counts`: partition_counts, if read."""
        layout = self.partitioned()
        conts = [layout.cont_key(p) for p in range(layout.partitions)]
        if layout.from_bits is not None:
            conts += [layout.key_at("sc", p, layout.from_bits) for p in range(layout.from_partitions or 0)]
        if counts is None:
            counts = yield from self.partition_counts()
        split = sum((yield from hash_lengths(conts))) + sum(c for _, c in counts)
        scan = Scan(glob_escape(key(self.metadata.namespace, "so") + b":") + b"*", batch=1000)
        out_of_line = 0
        while chunk := (yield scan):
            out_of_line += len(chunk)
        return split, out_of_line

    def count_keys(self) -> Flow[int]:
        """Sessions of a one-key-per-session layout: the keys a SCAN finds under the layout's
        prefix (the namespace escaped; every primary of a cluster)."""
        match = self.metadata.layout.count_match()
        if match is None:
            raise InvalidArgument(f"layout {self.metadata.layout.name} keeps no key per session")
        scan = Scan(match, batch=1000)
        total = 0
        while chunk := (yield scan):
            total += len(chunk)
        return total

    def count(self) -> Flow[int]:
        """Sessions stored (expired ones not yet swept included, for sweep-based layouts)."""
        if self.metadata.layout.partitioning() is None:
            return (yield from self.count_keys())
        return sum((yield from self.partition_sizes()))

    def summary(self, counts: list[tuple[int, int]], split: int, outside: int) -> dict[str, Any]:
        """What stats() says of a partitioned store, from partition_counts and outside_counts."""
        sizes = [e - c for e, c in counts]
        return {"sessions": sum(sizes), "fullest_partition": max(sizes, default=0),
                "fullest_partition_entries": max((e for e, _ in counts), default=0),
                "split_sessions": split, "out_of_line_sessions": outside,
                "warnings": self.fill_warnings([e for e, _ in counts])}

    def fill_warnings(self, entries: list[int]) -> list[str]:
        """Warnings for partitions near the listpack entry limit (`entries`: each partition's
        entries, partition_counts; a split session takes two)."""
        limit = self.metadata.facts.limits.hash_max_listpack_entries
        fullest = max(entries, default=0)
        if fullest > 0.9 * limit:
            return [
                (f"the fullest partition holds {fullest} entries of the {limit} a listpack may "
                "hold (a session takes one, two when its payload is split): partitions are about "
                "to convert to hashtables (several times the memory); "
                "grow the store online: `densekv repartition --partitions N` (or "
                "store.repartition(N)) with N twice the current count or more")
            ]
        return []


def hash_lengths(keys: list[bytes]) -> Flow[list[int]]:
    """HLEN of every key, 512 to a round trip."""
    out: list[int] = []
    for i in range(0, len(keys), 512):
        out += (yield [command("HLEN", k, keys=(k,), decode=int) for k in keys[i : i + 512]])
    return out

def _pair(reply: Any) -> tuple[int, int]:
    return int(reply[0]), int(reply[1])


__all__ = ["SWEEP_BATCH", "Sweeper", "hash_lengths"]
