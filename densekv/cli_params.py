"""The argument types every `densekv` command shares, checked by click before anything runs.

A bad value (a URL with port 99999, a count of 0, a partition count that is not a power
of two) is a click.BadParameter: densekv's main() prints it as one line and exits 2,
before a server is started or a key is touched. A URL is never echoed with its password.
Kept apart from densekv/cli.py so the subcommands' modules (lab, analyze, migrate) can
use the same types without importing the whole CLI.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import click
import redis

from densekv.connect import connect, redact
from densekv.errors import ServerUnavailable

URL_SCHEMES = ("redis", "rediss", "unix", "redis+cluster")

#: A loopback TCP port (0 would be "any", which `--port` leaves to the default).
PORT = click.IntRange(1, 65535)
#: A count of things to make, keep or move: at least one, at most a trillion.
COUNT = click.IntRange(1, 10**12)
#: A pause or period in seconds (0 allowed, a day at most).
SECONDS = click.FloatRange(0, 86_400)


class RedisUrl(click.ParamType):  # type: ignore[type-arg,unused-ignore]  # generic from click 8.3
    """redis://[:password@]host[:port][/db], rediss://, unix:// or redis+cluster://."""

    name = "URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        shown = redact(text)
        parts = urlsplit(text)
        if parts.scheme not in URL_SCHEMES:
            self.fail(f"{shown!r} is not a redis:// URL (redis://host:port/db, rediss://, unix://, "
                      "redis+cluster://)", param, ctx)
        try:
            port = parts.port
        except ValueError:
            self.fail(f"the port of {shown!r} is not a number from 1 to 65535", param, ctx)
        if port == 0:
            self.fail(f"the port of {shown!r} is not a number from 1 to 65535", param, ctx)
        if parts.scheme != "unix":
            if not parts.hostname:
                self.fail(f"{shown!r} names no host (redis://host:port/db)", param, ctx)
            db = parts.path.lstrip("/")
            if db and not (db.isascii() and db.isdigit()):
                self.fail(f"the database of {shown!r} is not a number (redis://host:port/DB)", param, ctx)
        return text


class PowerOfTwo(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """An integer power of two from 1 to 2**30 (a partition count)."""

    name = "POWER_OF_TWO"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        n = click.INT.convert(value, param, ctx)
        if n < 1 or n > 1 << 30 or n & (n - 1):
            self.fail(f"{n} is not a power of two from 1 to 2**30 (e.g. 64, 128, 1024)", param, ctx)
        return n


REDIS_URL = RedisUrl()
POWER_OF_TWO = PowerOfTwo()


def writable_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A callback for a file densekv will write: its directory must exist and be writable
    (checked before the command starts work, not when the first save fails)."""
    if value is None:
        return None
    parent = os.path.dirname(os.path.abspath(value))
    if not os.path.isdir(parent):
        raise click.BadParameter(f"the directory {parent} does not exist", ctx, param)
    if not os.access(parent, os.W_OK) or (os.path.exists(value) and not os.access(value, os.W_OK)):
        raise click.BadParameter(f"cannot write {value}: choose a file in a writable directory", ctx, param)
    return value


def connect_required(url: str) -> Any:
    """connect(url) for a command that needs --url (it cannot fall back to an embedded
    server): a dead URL says so without suggesting to leave --url out."""
    try:
        return connect(url)
    except ServerUnavailable as exc:
        cause = exc.__cause__
        if isinstance(cause, redis.AuthenticationError) or not isinstance(
            cause, (redis.ConnectionError, redis.TimeoutError, OSError)
        ):
            raise
        raise ServerUnavailable(
            f"nothing answers at {redact(url)}: start the server, or give --url of one that runs"
        ) from exc.__cause__
