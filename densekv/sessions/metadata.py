"""The store's metadata, shared by every process that opens the namespace: open it (or
create it for the namespace's first store), re-read it (a repartition began or ended, a
dictionary was trained elsewhere), write it again after the server lost it (a restart
without persistence, a flush, a failover to an empty replica), and what a create checks
beside its records (that the metadata and the dictionary it writes with are still there).

A mixin of SessionCore (densekv/sessions/core.py, whose attributes these are), kept apart
because it is one concern; it passes the core to payload_flows as a meta.StoreCore, so this
module does not import core.py. No I/O: flows, as in core.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from densekv.dictionaries import plan_store, plan_stored
from densekv.errors import DensekvError
from densekv.flows import Flow
from densekv.plan import Plan, command
from densekv.sessions import payload_flows as payloads
from densekv.sessions.index import IdentityIndex
from densekv.sessions.layouts.base import Layout
from densekv.sessions.meta import (
    Choice,
    ServerFacts,
    StoreCore,
    StoreMeta,
    make_layout,
    meta_key,
    plan_meta,
)
from densekv.sessions.payload import PayloadCodec

__all__ = ["MetadataFlows"]


class MetadataFlows:
    """open, refresh, recover and what they share, for SessionCore."""

    namespace: str
    facts: ServerFacts
    layout: Layout
    index: IdentityIndex | None
    codec: PayloadCodec
    choice: Choice
    asked_layout: str
    asked_partitions: int | None
    expected_sessions: int
    meta: StoreMeta | None
    meta_read_at: float
    ticks: Callable[[], float]
    _present: tuple[int | None, tuple[Plan[Any], ...]] | None

    def plan_open(self) -> Plan[StoreMeta | None]:
        """store_meta.lua's open: the metadata as this store would make it, if missing."""
        layout = self.layout
        return plan_meta(self.namespace, "open", layout.name, layout.partitions, int(self.index is not None))

    def open(self) -> Flow[None]:
        """Create the metadata if this is the namespace's first store, then adopt it."""
        meta = (yield [self.plan_open()])[0]
        self.adopt(meta)
        self.asked_partitions = None  # checked once, at open: later changes are repartitions
        yield from payloads.use_dictionary(cast(StoreCore, self))

    def refresh(self) -> Flow[bool]:
        """Re-read the metadata; True if it changed (a repartition began or ended). Metadata
        gone from a server that had it (a restart without persistence, a flush) is written
        again, with the dictionary this store writes with (recover)."""
        meta = (yield [plan_meta(self.namespace, "read")])[0]
        if meta is None and self.meta is not None:
            yield from self.recover()
            return False
        if meta is None or meta == self.meta:
            self.meta_read_at = self.ticks()
            return False
        self.adopt(meta)
        yield from payloads.use_dictionary(cast(StoreCore, self))
        return True

    def plans_present(self) -> list[Plan[Any]]:
        """What a create sends beside its records, in the same round trip: whether the
        server still holds the metadata and the dictionary this store writes with."""
        dict_id = self.codec.dictionary.id if self.codec.dictionary is not None else None
        made = self._present
        if made is None or made[0] != dict_id:  # plans hold no state: made once per dictionary
            plans: list[Plan[Any]] = [command("EXISTS", meta_key(self.namespace), keys=(meta_key(self.namespace),),
                                              decode=bool)]
            if dict_id is not None:
                plans.append(plan_stored(self.namespace, dict_id))
            made = self._present = (dict_id, tuple(plans))
        return list(made[1])

    def recover(self) -> Flow[None]:
        """The server lost the metadata or the dictionary (restart without persistence,
        flush, failover to an empty replica): write them again, so that what this store
        wrote (payloads naming its dictionary) reads in every process, and `densekv sweep`
        finds the store. Storing a dictionary again is harmless: its id is its content's
        (codec.content_id), so no other process can hold other bytes under it."""
        meta = (yield [self.plan_open()])[0]
        d = self.codec.dictionary
        if d is not None:
            yield [plan_store(self.namespace, d.data)]
            if meta is not None and meta.dictionary is None:
                meta = (yield [plan_meta(self.namespace, "dict", d.id)])[0]
        self.adopt(meta)
        yield from payloads.use_dictionary(cast(StoreCore, self))

    def adopt(self, meta: StoreMeta | None) -> None:
        self.meta_read_at = self.ticks()
        if meta is None:
            return
        if meta.index is not None and meta.index != (self.index is not None):
            said = "keep" if meta.index else "do not keep"
            raise DensekvError(
                f"namespace {self.namespace!r} is used by stores that {said} the identity index: "
                f"open it with index_identities={meta.index} (a store that disagrees would let "
                "destroy_all miss sessions), or use another namespace"
            )
        if meta.layout != self.layout.name:
            if self.asked_layout != "auto":
                raise DensekvError(
                    f"namespace {self.namespace!r} holds a {meta.layout!r} session store; open it "
                    f"with layout={meta.layout!r} (or 'auto'), or use another namespace"
                )
            self.choice = Choice(meta.layout, "the layout this namespace already holds")
        if self.asked_partitions and meta.partitions and self.asked_partitions != meta.partitions:
            raise DensekvError(
                f"namespace {self.namespace!r} holds {meta.partitions} partitions, not "
                f"{self.asked_partitions}: repartition it (densekv repartition) instead"
            )
        self.meta = meta
        self.layout = make_layout(self.choice.layout, self.namespace, self.facts, self.expected_sessions,
                                  None, meta)
