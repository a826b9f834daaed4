"""`densekv.connect(url)`: a redis-py client for a URL, checked to answer; `from_url`: the
same without the check (sync or asyncio), as the web backends build one per worker/loop.

Plain URLs give a `Redis` client; `redis+cluster://` (or `cluster=True`) a `RedisCluster`.
Every client built here has a connect and a read timeout (a stopped server must fail a
request, not hang it as long as it is down; redis-py's from_url sets none): TIMEOUTS for
web use (5 s each), TOOL_TIMEOUTS for `connect` (the CLI and the lab: 5 s to connect, 30 s
for a reply, since a FLUSHALL SYNC or a sweep of a big server takes seconds). Any of them
can be given as keyword arguments (`socket_timeout=None`: wait forever).
A URL that does not answer, or whose credentials the server refuses, raises
ServerUnavailable with a one-line hint; messages show the URL without its password.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis

from densekv.errors import ServerUnavailable


def redact(url: str) -> str:
    """The URL without its password (for messages, reports and records). Cut from the text,
    not parsed: it must work on URLs urlsplit cannot read (a port of 99999), and a password
    may hold '@' or '/', so the user info ends at the last '@'."""
    head, sep, rest = url.partition("//")
    userinfo, at, after = rest.rpartition("@")
    if not (sep and at and ":" in userinfo):
        return url
    return f"{head}//{userinfo.split(':', 1)[0]}:***@{after}"


TIMEOUTS: dict[str, float | None] = {"socket_connect_timeout": 5.0, "socket_timeout": 5.0}
TOOL_TIMEOUTS: dict[str, float | None] = {"socket_connect_timeout": 5.0, "socket_timeout": 30.0}


def _checked(url: str, cluster: bool) -> tuple[str, bool]:
    """(a URL redis-py reads, cluster?) for a redis://, rediss://, unix:// or redis+cluster:// URL."""
    if url.startswith("redis+cluster://"):
        url, cluster = "redis://" + url[len("redis+cluster://") :], True
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ServerUnavailable(f"{redact(url)!r} is not a redis:// URL")
    try:
        _ = urlsplit(url).port
    except ValueError as exc:
        raise ServerUnavailable(f"the port of {redact(url)} is not a number from 1 to 65535") from exc
    return url, cluster


def from_url(url: str, *, asyncio: bool = False, cluster: bool = False, **kwargs: Any) -> Any:
    """A client for `url` with TIMEOUTS (kwargs override them), not yet connected: sync
    `Redis`/`RedisCluster`, or with asyncio=True their redis.asyncio twins (an asyncio
    client belongs to the event loop that first uses it: build one per loop)."""
    url, cluster = _checked(url, cluster)
    options = {**TIMEOUTS, **kwargs}
    if asyncio:
        import redis.asyncio as aredis

        return (aredis.RedisCluster if cluster else aredis.Redis).from_url(url, **options)
    return (redis.RedisCluster if cluster else redis.Redis).from_url(url, **options)


def connect(url: str, *, cluster: bool = False, **kwargs: Any) -> redis.Redis | redis.RedisCluster:
    """A sync client for `url` with TOOL_TIMEOUTS (kwargs override them), checked to answer."""
    try:
        client: Any = from_url(url, cluster=cluster, **{**TOOL_TIMEOUTS, **kwargs})
        client.ping()
    except redis.AuthenticationError as exc:
        raise ServerUnavailable(
            f"the server at {redact(url)} refused the credentials: check the user and password in the URL"
        ) from exc
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise ServerUnavailable(
            f"nothing answers at {redact(url)}: start a server there, or leave out --url to use the embedded one"
        ) from exc
    except redis.RedisError as exc:
        hint = ": give the password in the URL (redis://:PASSWORD@host)" if "NOAUTH" in str(exc) else f": {exc}"
        raise ServerUnavailable(f"the server at {redact(url)} refused us{hint}") from exc
    return client  # type: ignore[no-any-return]
