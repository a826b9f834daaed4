"""The argument types every `densekv` command shares, checked by click before anything runs.

A bad value (a URL with port 99999, a count of 0, a partition count that is not a power
of two) is a click.BadParameter: densekv's main() prints it as one line and exits 2,
before a server is started or a key is touched. A URL is never echoed with its password.
Kept apart from densekv/tools/cli.py so the subcommands' modules (lab, analyze, migrate) can
use the same types without importing the whole CLI.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any
from urllib.parse import urlsplit

import click
import redis

from densekv.connect import connect, describe_failure, first_reply_timeout, redact
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


class ServerName(click.Choice):  # type: ignore[type-arg,unused-ignore]
    """A server of the matrix by name (--help lists them all); an unknown one is one line
    naming the choices. Whether its binary is present is checked when it is started."""

    def __init__(self) -> None:
        from densekv.tools.server.binaries import MATRIX, NEWER

        super().__init__((*MATRIX, *NEWER))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value in self.choices:
            return str(value)
        self.fail(f"unknown server {value!r}: choose one of {', '.join(map(str, self.choices))} "
                  "(densekv servers lists those present here)", param, ctx)


REDIS_URL = RedisUrl()
POWER_OF_TWO = PowerOfTwo()
SERVER_NAME = ServerName()


def can_create_in(directory: str) -> bool:
    """Whether a file can really be made in `directory` (os.access says yes to root even
    where the filesystem refuses, as in /proc): a temporary directory is made and removed."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".densekv-check-", dir=directory))
    except OSError:
        return False
    return True


def _existing_parent(path: str) -> str:
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def writable_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A callback for a file densekv will write: its directory must exist and be writable
    (checked before the command starts work, not when the first save fails)."""
    if value is None:
        return None
    parent = os.path.dirname(os.path.abspath(value))
    if not os.path.isdir(parent):
        raise click.BadParameter(f"the directory {parent} does not exist", ctx, param)
    if os.path.isdir(value):
        raise click.BadParameter(f"{value} is a directory: give a file name", ctx, param)
    exists_unwritable = os.path.exists(value) and not os.access(value, os.W_OK)
    if exists_unwritable or not can_create_in(parent):
        raise click.BadParameter(f"cannot write {value}: choose a file in a writable directory", ctx, param)
    return value


def writable_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A callback for a directory densekv will write into (created if missing): it must be
    a directory, or creatable under a writable one (checked before the command starts work,
    not when the report is written at the end)."""
    if value is None:
        return None
    path = os.path.abspath(value)
    if os.path.exists(path) and not os.path.isdir(path):
        raise click.BadParameter(f"{value} is a file, not a directory: choose a directory", ctx, param)
    existing = _existing_parent(path)
    if not os.path.isdir(existing) or not can_create_in(existing):
        raise click.BadParameter(f"cannot write into {value} ({existing} is not a writable directory): "
                                 "choose a writable directory", ctx, param)
    return value


def connect_required(url: str) -> Any:
    """connect(url) for a command that needs --url (it cannot fall back to an embedded
    server): a dead URL says so without suggesting to leave --url out."""
    try:
        return connect(url)
    except ServerUnavailable as exc:
        cause = exc.__cause__
        while cause is not None and cause.__cause__ is not None:  # RedisCluster wraps a node's error
            cause = cause.__cause__
        if isinstance(cause, redis.AuthenticationError) or not isinstance(
            cause, (redis.ConnectionError, redis.TimeoutError, OSError)
        ):
            raise
        found = describe_failure(url, cause, first_reply_timeout(), hint=": start the server, or give --url "
                                                                         "of one that runs")
        raise (found or ServerUnavailable(
            f"nothing answers at {redact(url)}: start the server, or give --url of one that runs"
        )) from exc.__cause__
