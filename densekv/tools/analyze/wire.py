"""The analyzer's one way to talk to the analyzed server: read-only commands, pipelined.

Everything sent to the live server goes through `roundtrip` (any read-only command) or
`key_facts_replies` (the four per-key commands of the scan, pre-encoded), and both refuse
a command outside READ_COMMANDS before anything is sent: the rule is enforced here and
nowhere else. Replies are raw (bytes, ints, lists, None); an error reply is a
redis.ResponseError in its place, except a command the ACL user may not run (NOPERM),
which raises once every reply is read.

Speed (a full scan sends four commands per key): the per-key commands are RESP-encoded
from one template, and densekv.wire (the one module that knows redis-py's internals) sends
the bytes and parses the replies with hiredis straight from the connection's socket
(redis-py's read_response costs ~5 us a reply); without hiredis, redis-py's reader is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.exceptions import NoPermissionError, ResponseError

from densekv.resp import pack
from densekv.wire import send_packed

#: Every command name the analyzer may send to the analyzed server (upper case; a
#: subcommand as "NAME SUB").
READ_COMMANDS = frozenset({
    "PING", "INFO", "DBSIZE", "CLUSTER SLOTS", "SCAN", "TYPE", "PTTL", "OBJECT ENCODING",
    "MEMORY USAGE", "GET", "HLEN", "HGETALL", "HSCAN", "SCARD", "SMEMBERS", "SSCAN", "ZCARD",
    "ZRANGE", "LLEN", "LRANGE", "XLEN", "XRANGE",
})
# each a command of the runtime's one list of those that never write, densekv.wire.READS
# (tests/unit/test_wire_adapter.py checks it)
_WITH_SUB = frozenset({"CLUSTER", "OBJECT", "MEMORY"})


class ReadOnlyViolation(AssertionError):
    """A bug of ours: the analyzer tried to send a command outside READ_COMMANDS."""


def command_name(cmd: Sequence[Any]) -> str:
    head = _text(cmd[0]).upper()
    if head in _WITH_SUB and len(cmd) > 1:
        return f"{head} {_text(cmd[1]).upper()}"
    return head


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _check(commands: Sequence[Sequence[Any]]) -> None:
    for cmd in commands:
        if command_name(cmd) not in READ_COMMANDS:
            raise ReadOnlyViolation(f"the analyzer may not send {command_name(cmd)}")


# TYPE k, PTTL k, OBJECT ENCODING k, MEMORY USAGE k SAMPLES 0: one template per key
_KEY_FACTS = (("TYPE", None), ("PTTL", None), ("OBJECT", "ENCODING", None),
              ("MEMORY", "USAGE", None, "SAMPLES", "0"))
_check(_KEY_FACTS)
_TEMPLATE = pack([tuple("\x00" if a is None else a for a in cmd) for cmd in _KEY_FACTS]) \
    .replace(b"$1\r\n\x00\r\n", b"$%d\r\n%b\r\n")
KEY_FACTS_PER_KEY = len(_KEY_FACTS)


def denied(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, NoPermissionError) or text.startswith("NOPERM") or "no permissions" in text


def _send(client: redis.Redis, payload: bytes, n: int) -> list[Any]:
    out = send_packed(client.connection_pool, payload, n)
    for reply in out:  # every reply was read: the connection stays usable
        if isinstance(reply, ResponseError) and denied(reply):
            raise reply
    return out


def roundtrip(client: redis.Redis, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Send read-only commands in one pipeline; their raw replies (see the module docstring)."""
    _check(commands)
    if not commands:
        return []
    return _send(client, pack(commands), len(commands))


def key_facts_replies(client: redis.Redis, keys: Sequence[bytes]) -> list[Any]:
    """TYPE, PTTL, OBJECT ENCODING, MEMORY USAGE SAMPLES 0 of each key: 4 replies per key."""
    if not keys:
        return []
    payload = b"".join(_TEMPLATE % (len(k), k, len(k), k, len(k), k, len(k), k) for k in keys)
    return _send(client, payload, KEY_FACTS_PER_KEY * len(keys))
