"""A server URL given to a web shell, checked when the app is set up rather than on its first
request: `check_url` refuses what densekv.connect.from_url would refuse later (a scheme that
is not redis://, rediss://, unix:// or redis+cluster://, a port that is not a number in
0-65535, a query option redis-py cannot read), with InvalidArgument (a ValueError) whose
message shows the URL without its password.

It builds no client: a RedisCluster connects when it is built, and constructors here do no
I/O. It parses with redis-py's ConnectionPool.from_url (no connection is made), the parser
from_url itself runs, so a URL passes here exactly when redis-py would take it. What only a
server can say (nothing listens there, a wrong password) is not known until a request uses
the session (docs/flask.md, Operations).
"""

from __future__ import annotations

import redis

from densekv.connect import redact
from densekv.errors import InvalidArgument

__all__ = ["check_url"]

CLUSTER_SCHEME = "redis+cluster://"  # densekv.connect.from_url's: a RedisCluster client


def check_url(url: object, where: str) -> str:
    """`url` if a client can be built from it; else InvalidArgument naming `where` (the
    argument or setting that gave it)."""
    if not isinstance(url, str):
        raise InvalidArgument(f"{where} is a URL string (redis://host:port/db), "
                              f"not {type(url).__name__}")
    plain = "redis://" + url[len(CLUSTER_SCHEME):] if url.startswith(CLUSTER_SCHEME) else url
    try:
        pool = redis.ConnectionPool.from_url(plain)
    except ValueError as exc:  # redis-py's messages do not repeat the URL (nor its password)
        raise InvalidArgument(
            f"{where} {redact(url)!r} is not a URL densekv can connect to: {exc}; give "
            "redis://host:port/db, rediss://..., unix:///path/to.sock or "
            "redis+cluster://host:port") from None
    pool.disconnect()  # nothing is connected yet: drops the pool's (empty) connection lists
    return url
