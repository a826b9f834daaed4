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

`connect` first asks the node named for one reply within FIRST_REPLY seconds (5; the
environment's DENSEKV_CONNECT_TIMEOUT sets it), so a port that accepts and never answers
fails in seconds, not after the 30 s a later reply may take. Why a URL cannot be used is
said by its cause (describe_failure), each its own line: no connection within the time
(or no reply), what answered is not a Redis server (an HTTP or SSH server, TLS, ... as
far as its first bytes tell), the host name does not resolve, the connection was refused.
"""

from __future__ import annotations

import os
import socket
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
FIRST_REPLY = 5.0  # seconds for `connect`'s first connection and reply, unless the environment says
TIMEOUT_ENV = "DENSEKV_CONNECT_TIMEOUT"


def first_reply_timeout() -> float:
    """FIRST_REPLY, or the seconds in DENSEKV_CONNECT_TIMEOUT (a positive number)."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return FIRST_REPLY
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 86400:
        raise ServerUnavailable(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds: give one like 5 or 0.5")
    return seconds


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
    first = first_reply_timeout()
    client: Any = None
    try:
        # first the node named, on a plain connection with the short FIRST_REPLY timeouts: a
        # port that never answers fails fast, and RedisCluster would leave its socket open
        # when the node is no cluster, and say so only as "cannot be connected"
        node_options = {k: v for k, v in options.items() if k not in TOOL_TIMEOUTS and (
            not cluster or k in ("password", "username") or k.startswith("ssl"))}  # a node takes no cluster options
        node = redis.Redis.from_url(plain, socket_connect_timeout=first, socket_timeout=first, **node_options)
        try:
            node.ping()
            enabled = int(node.info("cluster").get("cluster_enabled", 0)) if cluster else 1
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
        raise _unavailable(url, exc, cluster, given, first) from exc
    return client  # type: ignore[no-any-return]


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost error: RedisCluster wraps what a node said in a RedisClusterException."""
    seen = {id(exc)}
    while exc.__cause__ is not None and id(exc.__cause__) not in seen:
        exc = exc.__cause__
        seen.add(id(exc))
    return exc


def _chain(exc: BaseException) -> list[BaseException]:
    """The error and every error it was raised from or while handling (redis-py wraps the
    socket's own: a gaierror, a ConnectionRefusedError, a socket timeout)."""
    out: list[BaseException] = []
    at: BaseException | None = exc
    while at is not None and all(at is not e for e in out):
        out.append(at)
        at = at.__cause__ or at.__context__
    return out


def _host_port(url: str) -> tuple[str | None, int]:
    parts = urlsplit(url)
    return parts.hostname, parts.port or 6379


def what_answers(url: str, seconds: float) -> str:
    """What a server that does not speak RESP sent back to a PING, as far as its first
    bytes tell: "an HTTP server (it answered 'HTTP/1.1 400 Bad Request')", ..."""
    host, port = _host_port(url)
    if host is None:
        return "it does not answer in RESP"
    try:
        with socket.create_connection((host, port), timeout=seconds) as sock:
            sock.settimeout(seconds)
            try:
                sock.sendall(b"PING\r\n")
            except OSError:
                pass  # a server that talks first (SSH) may have closed already: read what it said
            head = sock.recv(256)
    except OSError:
        return "it does not answer in RESP"
    line = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0][:60].decode("latin-1")
    if head.startswith(b"HTTP/"):
        return f"an HTTP server (it answered {line!r})"
    if head.startswith(b"SSH-"):
        return f"an SSH server ({line!r})"
    if head[:1] in (b"\x15", b"\x16") and head[1:2] == b"\x03":
        return "a TLS server (for Redis over TLS, give a rediss:// URL)"
    if head.startswith((b"220", b"* OK")):
        return f"a mail or file server ({line!r})"
    if head and line.isprintable():
        return f"it answered {line!r}"
    return f"it answered {len(head)} bytes that are not RESP" if head else "it closed the connection"


def describe_failure(url: str, exc: BaseException, seconds: float, *, hint: str = "") -> ServerUnavailable | None:
    """The one line for a URL nothing usable answers at, by its cause: the connection (or
    the first reply) timed out after `seconds`, what answered is not a Redis server, the host
    name does not resolve, or the connection was refused (`hint`: what to do then). None when
    `exc` is none of these (a refused password, an error reply: the caller says those)."""
    shown = redact(url)
    chain = _chain(exc)
    if any(isinstance(e, socket.gaierror) for e in chain):
        host, _ = _host_port(url)
        return ServerUnavailable(f"the host name {host!r} of {shown} does not resolve: check the host in the URL")
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "Connection refused" in str(exc):
        return ServerUnavailable(f"nothing answers at {shown}: the connection was refused (no server listens on "
                                 f"that port){hint}")
    if any(isinstance(e, (redis.TimeoutError, socket.timeout, TimeoutError)) for e in chain):
        what = f"no connection to {shown}" if "connecting" in str(exc).lower() else \
            f"{shown} accepted the connection but sent no reply"
        return ServerUnavailable(f"{what} within {seconds:g} s: a server that hangs, or a firewall that drops "
                                 f"the packets ({TIMEOUT_ENV}=SECONDS waits longer)")
    if any(isinstance(e, redis.exceptions.InvalidResponse) for e in chain) or "Protocol error" in str(exc):
        return ServerUnavailable(f"what answers at {shown} is not a Redis server: {what_answers(url, seconds)}; "
                                 "check the host and port")
    return None


def _unavailable(url: str, exc: BaseException, cluster: bool, given: bool, seconds: float) -> ServerUnavailable:
    """The one line for a URL that does not give a working client (see connect)."""
    shown = redact(url)
    parts = urlsplit(url)
    has_credentials = given or bool(parts.password or parts.username)
    cause = _root_cause(exc)
    text = str(cause)
    found = describe_failure(url, exc, seconds, hint=": start a server there, or leave out --url to use the "
                                                     "embedded one")
    if found is not None:
        return found
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
__all__ = ["FIRST_REPLY", "TIMEOUTS", "TIMEOUT_ENV", "TOOL_TIMEOUTS", "connect", "describe_failure",
           "first_reply_timeout", "from_url", "redact", "what_answers"]
