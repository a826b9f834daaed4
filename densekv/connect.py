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
    """A sync client for `url` with TOOL_TIMEOUTS (kwargs override them), checked to answer.

    Every way of not answering is a ServerUnavailable with one line saying what to do: nothing
    listens there, the server wants a password the URL lacks, it refused the URL's
    credentials, or a redis+cluster:// URL names a server that is not in cluster mode."""
    plain, cluster = _checked(url, cluster)
    given = bool(kwargs.get("password") or kwargs.get("username"))
    options = {**TOOL_TIMEOUTS, **kwargs}
    client: Any = None
    try:
        if cluster:  # first the node named, on a plain connection: RedisCluster would leave its socket
            # open when the node is no cluster, and say so only as "cannot be connected"
            shared = ("password", "username", "socket_connect_timeout", "socket_timeout", "ssl_cert_reqs")
            node = redis.Redis.from_url(plain, **{k: v for k, v in options.items() if k in shared})
            try:
                node.ping()
                enabled = int(node.info("cluster").get("cluster_enabled", 0))
            finally:
                node.close()
            if not enabled:
                raise ServerUnavailable(
                    f"the server at {redact(url)} is not a cluster (cluster mode is off): "
                    "give its URL as redis://... instead of redis+cluster://...")
        client = from_url(url, cluster=cluster, **options)
        client.ping()
    except (redis.RedisError, redis.exceptions.RedisClusterException, OSError) as exc:
        if client is not None:
            client.close()
        raise _unavailable(url, exc, cluster, given) from exc
    return client  # type: ignore[no-any-return]


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost error: RedisCluster wraps what a node said in a RedisClusterException."""
    seen = {id(exc)}
    while exc.__cause__ is not None and id(exc.__cause__) not in seen:
        exc = exc.__cause__
        seen.add(id(exc))
    return exc


def _unavailable(url: str, exc: BaseException, cluster: bool, given: bool) -> ServerUnavailable:
    """The one line for a URL that does not give a working client (see connect)."""
    shown = redact(url)
    parts = urlsplit(url)
    has_credentials = given or bool(parts.password or parts.username)
    cause = _root_cause(exc)
    text = str(cause)
    if isinstance(cause, redis.AuthenticationError) or "NOAUTH" in text or "WRONGPASS" in text:
        if has_credentials:
            return ServerUnavailable(
                f"the server at {shown} refused the credentials: check the user and password in the URL")
        return ServerUnavailable(
            f"the server at {shown} needs a password and the URL gives none: "
            "put it in the URL (redis://:PASSWORD@host:port/db, or redis://USER:PASSWORD@...)")
    if isinstance(cause, (redis.ConnectionError, redis.TimeoutError, OSError)):
        return ServerUnavailable(
            f"nothing answers at {shown}: start a server there, or leave out --url to use the embedded one")
    lowered = text.lower()
    if cluster and ("cluster mode is not enabled" in lowered or "cluster support disabled" in lowered):
        return ServerUnavailable(
            f"the server at {shown} is not a cluster (cluster mode is off): "
            "give its URL as redis://... instead of redis+cluster://...")
    if isinstance(cause, redis.exceptions.RedisClusterException):
        return ServerUnavailable(f"no cluster answers at {shown}: {text}")
    return ServerUnavailable(f"the server at {shown} refused us: {text}")


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["TIMEOUTS", "TOOL_TIMEOUTS", "connect", "from_url", "redact"]
