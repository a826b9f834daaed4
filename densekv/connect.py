"""`densekv.connect(url)`: a redis-py client for a URL, checked to answer.

Plain URLs give a `Redis` client; `redis+cluster://` (or `cluster=True`) a `RedisCluster`.
A URL that does not answer raises ServerUnavailable with a one-line hint.
"""

from __future__ import annotations

from typing import Any

import redis

from densekv.errors import ServerUnavailable


def connect(url: str, *, cluster: bool = False, **kwargs: Any) -> redis.Redis | redis.RedisCluster:
    if url.startswith("redis+cluster://"):
        url, cluster = "redis://" + url[len("redis+cluster://") :], True
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ServerUnavailable(f"{url!r} is not a redis:// URL")
    kwargs.setdefault("socket_connect_timeout", 3)
    try:
        client: Any = (
            redis.RedisCluster.from_url(url, **kwargs) if cluster else redis.Redis.from_url(url, **kwargs)
        )
        client.ping()
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise ServerUnavailable(
            f"nothing answers at {url}: start a server there, or leave out --url to use the embedded one"
        ) from exc
    except redis.RedisError as exc:
        raise ServerUnavailable(f"the server at {url} refused us: {exc}") from exc
    return client  # type: ignore[no-any-return]
