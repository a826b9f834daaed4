"""CLUSTER NODES parsed: who is master or replica of whom, who serves which slot, who is
flagged failing. Pure (no I/O), so the health checks of the local cluster
(densekv/tools/server/cluster.py) compare one node's view with another's as plain values.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeView:
    """One line of CLUSTER NODES, as one node sees another."""

    node_id: str
    port: int
    role: str  # "master" or "slave"
    master_id: str  # "-" for a master
    failed: bool  # flagged fail or pfail
    slots: frozenset[int]


@dataclass(frozen=True)
class Topology:
    """A node's view of the cluster: every node it knows, by id."""

    nodes: dict[str, NodeView]

    @classmethod
    def parse(cls, text: str) -> Topology:
        out: dict[str, NodeView] = {}
        for line in text.strip().splitlines():
            parts = line.split()
            node_id, addr, flags, master_id = parts[0], parts[1], parts[2].split(","), parts[3]
            slots: set[int] = set()
            for token in parts[8:]:
                if token.startswith("["):  # a slot being imported/migrated
                    continue
                lo, _, hi = token.partition("-")
                slots.update(range(int(lo), int(hi or lo) + 1))
            port = int(addr.split("@")[0].rsplit(":", 1)[1])
            role = "master" if "master" in flags else "slave"
            out[node_id] = NodeView(node_id, port, role, master_id, "fail" in flags or "fail?" in flags,
                                    frozenset(slots))
        return cls(out)

    def roles(self, among: set[str]) -> frozenset[tuple[str, str, str]]:
        """(id, role, master id) of the nodes `among` (ids): what every node must agree on."""
        return frozenset((v.node_id, v.role, v.master_id) for v in self.nodes.values() if v.node_id in among)

    def owners(self) -> dict[int, str]:
        """slot -> id of the master serving it."""
        return {s: v.node_id for v in self.nodes.values() if v.role == "master" for s in v.slots}

    def owner_port(self, slot: int) -> int | None:
        """The port of the master serving `slot` in this view (None: nobody)."""
        owner = self.owners().get(slot)
        return self.nodes[owner].port if owner is not None else None

    def by_port(self, port: int) -> NodeView:
        for v in self.nodes.values():
            if v.port == port:
                return v
        raise KeyError(port)
