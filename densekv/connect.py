"""`densekv.connect(url)`: a redis-py client for a URL, checked to answer.

Plain URLs give a `Redis` client; `redis+cluster://` (or `cluster=True`) a `RedisCluster`.
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


def connect(url: str, *, cluster: bool = False, **kwargs: Any) -> redis.Redis | redis.RedisCluster:
    if url.startswith("redis+cluster://"):
        url, cluster = "redis://" + url[len("redis+cluster://") :], True
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ServerUnavailable(f"{redact(url)!r} is not a redis:// URL")
    kwargs.setdefault("socket_connect_timeout", 3)
    try:
        _ = urlsplit(url).port
    except ValueError as exc:
        raise ServerUnavailable(f"the port of {redact(url)} is not a number from 1 to 65535") from exc
    try:
        client: Any = (
            redis.RedisCluster.from_url(url, **kwargs) if cluster else redis.Redis.from_url(url, **kwargs)
        )
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
