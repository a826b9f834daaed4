"""What a session store's keys hold and what it sends, read with plain commands: shared by
the session tests that count continuation fields (layouts/partitioned.py) and the commands
of one operation (MONITOR)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from densekv.sessions.layouts.partitioned import is_cont_field

END = "densekv-test-monitor-end"


def commands_during(client: redis.Redis, act: Callable[[], Any]) -> list[str]:
    """The commands the server ran while `act()` ran (MONITOR; a marker SET ends the list)."""
    seen: list[str] = []
    with client.monitor() as m:
        act()
        client.set(END, 1)
        for line in m.listen():
            if END in line["command"]:
                break
            seen.append(line["command"])
    return seen


def continuations(client: redis.Redis, namespace: str, bits: int) -> tuple[int, int]:
    """(continuation fields in the namespace's partition hashes of `bits` partition bits,
    entries of densekv 0.1.0's continuation hashes); repartition tombstones skipped."""
    here = old = 0
    for k in client.scan_iter(match=f"{namespace}:sd:*"):
        if client.type(k) == b"hash":
            here += sum(is_cont_field(f, bits) for f in client.hkeys(k))
    for k in client.scan_iter(match=f"{namespace}:sc:*"):
        if client.type(k) == b"hash":
            old += client.hlen(k)
    return here, old
