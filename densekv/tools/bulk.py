"""Bulk loading: many simple commands, pipelined, as fast as one Python process can go.

The lab loads millions of items and users import existing data with it. Commands are
encoded to RESP by densekv.wire (bytes, str, int and float arguments), written in
batches on one connection, and every reply is read and checked, so an error (WRONGTYPE,
OOM) stops the load with the count of commands that succeeded before it. On a cluster,
each batch is split by the slot of its key (args[1], or an explicit key) and sent to
the owning node.

Target (issue 2): >= 150k simple commands/s; measured by benchmarks/bulk_load.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import redis
from redis.crc import key_slot
from redis.exceptions import ResponseError

from densekv.errors import BulkLoadError as _BulkLoadError
from densekv.errors import ServerUnavailable
from densekv.resp import arg_bytes, pack
from densekv.wire import send_packed

DEFAULT_BATCH = 2000


def encode_commands(commands: Iterable[tuple[Any, ...]]) -> bytes:
    """RESP-encode commands (densekv.resp.pack: *N CRLF then $len CRLF arg CRLF per argument)."""
    return pack(list(commands))


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def _send_batch(pool: Any, batch: list[tuple[Any, ...]], done: int) -> None:
    try:
        replies = send_packed(pool, pack(batch), len(batch))
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise ServerUnavailable(f"lost the server during a bulk load: {exc}") from exc
    for at, reply in enumerate(replies):
        if isinstance(reply, ResponseError):
            raise _BulkLoadError(
                f"command {done + at + 1} ({arg_bytes(batch[at][0]).decode()}) failed: {reply}",
                done=done + at,
            )


def bulk_load(
    client: redis.Redis | redis.RedisCluster,
    commands: Iterable[tuple[Any, ...]],
    *,
    batch: int = DEFAULT_BATCH,
    progress: Any = None,
) -> int:
    """Send every command, `batch` per round trip; return how many were sent.

    `commands` may be a generator (bounded memory: one batch at a time). `progress`, if
    given, is called with the count of commands done after each batch.
    """
    done = 0
    for chunk in _chunks(commands, batch):
        if isinstance(client, redis.RedisCluster):
            groups: dict[str, tuple[Any, list[tuple[Any, ...]]]] = {}
            for cmd in chunk:
                node = client.nodes_manager.get_node_from_slot(key_slot(arg_bytes(cmd[1])))
                groups.setdefault(node.name, (node, []))[1].append(cmd)
            for node, cmds in groups.values():
                _send_batch(client.get_redis_connection(node).connection_pool, cmds, done)
        else:
            _send_batch(client.connection_pool, chunk, done)
        done += len(chunk)
        if progress is not None:
            progress(done)
    return done
