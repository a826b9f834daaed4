"""The harness's side of each container: fill it with sessions in the format the app
reads, say how many bytes it holds, and run its housekeeping.

Every backend fills through the container's own format code: the app's stores
(stores.py), Flask-Session's key prefix and JSON encoding, densekv's SessionStore with
the app's arguments. Session data comes from the payload profiles
(densekv.tools.lab.session_profiles): session i of a profile is the same bytes in every
container, generated and JSON-encoded once per run (`Payloads`, shared by the run's
backends): the encoding is the compact JSON of stores.encode, byte for byte what
Flask-Session's msgspec serializer writes for these ASCII payloads (a test checks it).

Bulk loads, never one request per session: the in-process dict in chunks through the
app's /_lab/fill, files written in place, SQL in one transaction (executemany / COPY),
Redis in pipelines of BATCH, densekv with SessionStore.create_each, memcached set_many.

`fill(start, count, expires)` stores sessions start .. start+count-1, all expiring at
`expires` (epoch seconds), and returns their cookie values. `size()` is the container's
bytes now (None: not measurable): RSS of the app's worker for the in-process dict and of
the memcached process, bytes on disk for files and SQL, used_memory less client buffers
for Redis. `sweep(as_of)` removes every session that has expired by `as_of` and returns
how many; None for containers without application-side housekeeping (memcached and
Redis expire keys themselves).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from densekv.tools.lab.containers.config import FLASK_SESSION_PREFIX, AppConfig
from densekv.tools.lab.containers.stores import FileStore, SqlStore, encode, new_sid
from densekv.tools.lab.session_profiles import sessions

BATCH = 2000
#: values Flask's tagged JSON keeps as they are (tag_value(v) is v): skipped in bulk loads
_UNTAGGED = (str, bool, int, float, type(None))


class Payloads:
    """Session i of one profile as (identity, JSON text), generated on first use and
    kept for the run (about 300 B per session)."""

    def __init__(self, profile: str) -> None:
        self.profile = profile
        self.items: list[tuple[int | None, str]] = []

    def get(self, start: int, count: int) -> list[tuple[int | None, str]]:
        have = len(self.items)
        if have < start + count:
            self.items += [(identity, encode(data))
                           for identity, data in sessions(self.profile, start + count - have, start=have)]
        return self.items[start:start + count]

    def rows(self, start: int, count: int, expires: float) -> tuple[list[str], list[tuple[str, str, float]]]:
        """New session ids and (sid, JSON text, expires) rows for sessions start .. start+count-1."""
        sids = [new_sid() for _ in range(count)]
        return sids, [(sid, text, expires) for sid, (_, text) in zip(sids, self.get(start, count))]


class Backend:
    def __init__(self, config: AppConfig, profile: str) -> None:
        self.config = config
        self.profile = profile
        self.payloads = Payloads(profile)  # the harness gives every backend of a run the same one

    def prepare(self) -> None:
        """Before the app starts: schema, directories, the densekv namespace."""

    def attach(self, app_url: str) -> None:
        """After the app started (the in-process dict is reached through it)."""

    def fill(self, start: int, count: int, expires: float) -> list[str]:
        raise NotImplementedError

    def size(self) -> int | None:
        return None

    def sweep(self, as_of: float) -> int | None:
        return None

    def store_pids(self) -> list[int]:
        """The processes that keep the sessions outside the app (their CPU time per
        request is the container's cost there); none for the app's own stores."""
        return []

    def close(self) -> None:
        pass


class NoStore(Backend):
    """The ceiling: nothing is stored; the cookies sent are well-formed but unknown."""

    def fill(self, start: int, count: int, expires: float) -> list[str]:
        return [new_sid() for _ in range(count)]


class InProcess(Backend):
    """The dict lives in the worker: filled, measured and swept through /_lab."""

    CHUNK = 50_000

    def attach(self, app_url: str) -> None:
        self.url = app_url

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def fill(self, start: int, count: int, expires: float) -> list[str]:
        sids: list[str] = []
        for first in range(start, start + count, self.CHUNK):
            chunk, rows = self.payloads.rows(first, min(self.CHUNK, start + count - first), expires)
            self._post("/_lab/fill", {"rows": [[sid, text] for sid, text, _ in rows], "expires": expires})
            sids += chunk
        return sids

    def size(self) -> int | None:
        with urllib.request.urlopen(self.url + "/_lab/rss", timeout=600) as r:
            return int(json.loads(r.read())["rss"])

    def sweep(self, as_of: float) -> int | None:
        return int(self._post("/_lab/sweep", {"as_of": as_of})["removed"])


class Files(Backend):
    def prepare(self) -> None:
        self.store = FileStore(self.config.files_root, hashed=self.config.container == "files-hashed",
                               lifetime=self.config.lifetime)

    def fill(self, start: int, count: int, expires: float) -> list[str]:
        sids, rows = self.payloads.rows(start, count, expires)
        self.store.fill_encoded(rows)
        return sids

    def size(self) -> int | None:
        return self.store.size()

    def sweep(self, as_of: float) -> int | None:
        return self.store.sweep(as_of)


class Sql(Backend):
    def __init__(self, config: AppConfig, profile: str, connect: Callable[[], SqlStore],
                 server_pids: Callable[[], list[int]] | None = None) -> None:
        super().__init__(config, profile)
        self.connect = connect
        self.store: SqlStore | None = None
        self.server_pids = server_pids

    def store_pids(self) -> list[int]:
        return self.server_pids() if self.server_pids else []

    def prepare(self) -> None:
        self.store = self.connect()
        self.store.create_schema()

    def fill(self, start: int, count: int, expires: float) -> list[str]:
        assert self.store is not None
        sids, rows = self.payloads.rows(start, count, expires)
        self.store.fill_encoded(rows)
        return sids

    def size(self) -> int | None:
        assert self.store is not None
        return self.store.size()

    def sweep(self, as_of: float) -> int | None:
        assert self.store is not None
        return self.store.sweep(as_of)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


class RedisBytes(Backend):
    """A container in the Redis target: size = used_memory less client buffers, read
    after the server settled (densekv's Meter)."""

    def __init__(self, config: AppConfig, profile: str, client: Any, meter: Any) -> None:
        super().__init__(config, profile)
        self.client = client
        self.meter = meter

    def size(self) -> int | None:
        reading = self.meter.reading()
        return int(reading.used_memory - reading.clients_memory)

    def store_pids(self) -> list[int]:
        """The server's pid if it runs on this machine (INFO process_id, on loopback)."""
        host = str(self.client.connection_pool.connection_kwargs.get("host", ""))
        if host not in ("127.0.0.1", "localhost", "::1"):
            return []
        pid = int(self.client.info("server").get("process_id", 0))
        return [pid] if pid and os.path.exists(f"/proc/{pid}") else []


class FlaskSessionRedis(RedisBytes):
    """Flask-Session's RedisSessionInterface format: key `session:<sid>`, the session as
    JSON (msgspec's bytes), SET with EX."""

    def fill(self, start: int, count: int, expires: float) -> list[str]:
        sids, rows = self.payloads.rows(start, count, expires)
        ex = max(1, int(expires - time.time()))
        pipe = self.client.pipeline(transaction=False)
        for i, (sid, text, _) in enumerate(rows, 1):
            pipe.execute_command("SET", FLASK_SESSION_PREFIX + sid, text.encode(), "EX", ex)
            if i % BATCH == 0:
                pipe.execute()
        pipe.execute()
        self.client.connection_pool.disconnect()  # the loader's buffers are not data
        return sids


class Densekv(RedisBytes):
    """densekv's Flask backend format: the SessionStore the app opens (same namespace and
    arguments), values in Flask's tagged form, the profile's user id as the identity.
    Sessions go in with SessionStore.create_each, BATCH per round trip, each with its own
    data."""

    def prepare(self) -> None:
        from densekv.tools.lab.containers.app import densekv_store

        self.store = densekv_store(self.config, self.client)

    def fill(self, start: int, count: int, expires: float) -> list[str]:
        from densekv.integrations.flask_session import tag_value

        ttl = max(1, int(expires - time.time()))
        tagged = ((identity, {k: v if type(v) in _UNTAGGED else tag_value(v) for k, v in json.loads(text).items()})
                  for identity, text in self.payloads.get(start, count))
        tokens: list[str] = self.store.create_each(tagged, ttl, batch=BATCH)
        self.client.connection_pool.disconnect()
        return tokens

    def sweep(self, as_of: float) -> int | None:
        from densekv.tools.lab.containers.app import densekv_store

        shift = as_of - time.time()
        sweeper = densekv_store(self.config, self.client, clock=lambda: time.time() + shift)
        return int(sweeper.sweep())

    def layout(self) -> str:
        explained = self.store.explain()
        return f"{explained.get('layout')}, partitions {explained.get('partitions')}, " \
               f"identity index {'on' if explained.get('index_partitions') is not None else 'off'}"


class Memcache(Backend):
    """Flask-Session's MemcachedSessionInterface format (key `session:<sid>`, JSON);
    size = RSS of the memcached process."""

    def __init__(self, config: AppConfig, profile: str, rss: Callable[[], int], pid: int | None = None) -> None:
        super().__init__(config, profile)
        self.rss = rss
        self.pid = pid

    def store_pids(self) -> list[int]:
        return [self.pid] if self.pid else []

    def fill(self, start: int, count: int, expires: float) -> list[str]:
        from pymemcache.client.base import Client

        host, _, port = self.config.url.rpartition(":")
        client = Client((host, int(port)))
        sids, rows = self.payloads.rows(start, count, expires)
        ttl = max(1, int(expires - time.time()))
        chunk: dict[str, bytes] = {}
        try:
            for sid, text, _ in rows:
                chunk[FLASK_SESSION_PREFIX + sid] = text.encode()
                if len(chunk) == BATCH:
                    client.set_many(chunk, expire=ttl, noreply=False)
                    chunk = {}
            if chunk:
                client.set_many(chunk, expire=ttl, noreply=False)
        finally:
            client.close()
        return sids

    def size(self) -> int | None:
        return self.rss()
