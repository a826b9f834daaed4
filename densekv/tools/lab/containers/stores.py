"""The containers the app keeps itself: in-process dict, file per session, SQL table.

One class per storage format, used by both sides: the app calls load/save/delete on
every request; the harness calls fill (N sessions at once, in the same format), size
(bytes the container takes) and sweep (housekeeping: remove what expired before `as_of`).

Formats (session data is compact JSON everywhere):
  dict   {sid: (expires, data dict)} in the worker; size = the worker's RSS (measured
         by the app, see app.py)
  files  ROOT/SID (flat) or ROOT/S/SID (hashed: the id's first character names one of
         64 directories, as PHP's session.save_path = "1;/path"); expiry is
         the file's age: mtime + lifetime; size = allocated blocks of every file and
         directory (what du counts)
  sql    sessions(sid, data, expires): indexed = sid PRIMARY KEY and an index on
         expires; unindexed = neither. Reads ask `sid = ? AND expires > now`; a save is
         UPDATE, then INSERT if no row matched (one statement pair for both variants);
         size = pages of the SQLite file after a WAL checkpoint, or PostgreSQL's
         pg_total_relation_size (table, TOAST and indexes)

A session id is `secrets.token_urlsafe(32)` (43 URL-safe characters); anything else in a
cookie is "no session" before any store is asked, so a cookie never names a path.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

Row = tuple[str, dict[str, Any], float]  # (sid, data, expires)

_SID = re.compile(r"[A-Za-z0-9_-]{43}")


def new_sid() -> str:
    return secrets.token_urlsafe(32)


def valid_sid(value: str | None) -> bool:
    return value is not None and _SID.fullmatch(value) is not None


def encode(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


class Store(Protocol):
    def load(self, sid: str, now: float) -> dict[str, Any] | None: ...

    def save(self, sid: str, data: dict[str, Any], expires: float) -> None: ...

    def delete(self, sid: str) -> None: ...


# -- in-process dict -------------------------------------------------------------------


class DictStore:
    """The seed's MemoryStore: sessions in the worker's own memory."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[float, dict[str, Any]]] = {}

    def load(self, sid: str, now: float) -> dict[str, Any] | None:
        item = self.items.get(sid)
        if item is None or item[0] <= now:
            return None
        return dict(item[1])

    def save(self, sid: str, data: dict[str, Any], expires: float) -> None:
        self.items[sid] = (expires, dict(data))

    def delete(self, sid: str) -> None:
        self.items.pop(sid, None)

    def fill(self, rows: Iterable[Row]) -> int:
        count = 0
        for sid, data, expires in rows:
            self.items[sid] = (expires, data)
            count += 1
        return count

    def sweep(self, as_of: float) -> int:
        dead = [sid for sid, (expires, _) in self.items.items() if expires < as_of]
        for sid in dead:
            del self.items[sid]
        return len(dead)


# -- file per session ------------------------------------------------------------------


class FileStore:
    def __init__(self, root: Path, *, hashed: bool, lifetime: float) -> None:
        self.root = root
        self.hashed = hashed
        self.lifetime = lifetime
        root.mkdir(parents=True, exist_ok=True)

    def path(self, sid: str) -> Path:
        return self.root / sid[0] / sid if self.hashed else self.root / sid

    def load(self, sid: str, now: float) -> dict[str, Any] | None:
        try:
            with open(self.path(sid), "rb") as f:
                if os.fstat(f.fileno()).st_mtime + self.lifetime <= now:
                    return None
                data: dict[str, Any] = json.loads(f.read())
                return data
        except FileNotFoundError:
            return None

    def save(self, sid: str, data: dict[str, Any], expires: float) -> None:
        path = self.path(sid)
        tmp = path.with_name(f".{sid}.tmp")
        text = encode(data)
        try:
            tmp.write_text(text)
        except FileNotFoundError:  # first session in this hashed directory
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text)
        written = expires - self.lifetime  # the age that expires at `expires`
        if abs(written - time.time()) > 1:
            os.utime(tmp, (written, written))
        os.replace(tmp, path)

    def delete(self, sid: str) -> None:
        self.path(sid).unlink(missing_ok=True)

    def fill(self, rows: Iterable[Row]) -> int:
        """Bulk load: each file written once in place (no temporary file and rename: the
        app reads none of these while they are written), its age set on the open file."""
        return self.fill_encoded((sid, encode(data), expires) for sid, data, expires in rows)

    def fill_encoded(self, rows: Iterable[tuple[str, str, float]]) -> int:
        """fill() with the data already JSON text."""
        count = 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        now = time.time()
        for sid, text, expires in rows:
            path = self.path(sid)
            try:
                fd = os.open(path, flags, 0o644)
            except FileNotFoundError:  # first session in this hashed directory
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, flags, 0o644)
            try:
                os.write(fd, text.encode())
                written = expires - self.lifetime  # the age that expires at `expires`
                if abs(written - now) > 1:
                    os.utime(fd, (written, written))
            finally:
                os.close(fd)
            count += 1
        return count

    def _files(self) -> Iterator[os.DirEntry[str]]:
        stack = [str(self.root)]
        while stack:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        yield entry

    def sweep(self, as_of: float) -> int:
        """The age sweep a cron job runs: remove files older than the lifetime at as_of."""
        cutoff = as_of - self.lifetime
        removed = 0
        for entry in self._files():
            try:
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    def size(self) -> int:
        """Bytes allocated on disk for every file and directory under the root (du)."""
        total = os.stat(self.root).st_blocks * 512
        stack = [str(self.root)]
        while stack:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        return total


# -- SQL table -------------------------------------------------------------------------


class SqlStore:
    """Sessions in one table of SQLite or PostgreSQL; `conn` is a DB-API connection in
    autocommit mode (sqlite3 with isolation_level=None, psycopg with autocommit=True)."""

    def __init__(self, conn: Any, *, dialect: str, indexed: bool) -> None:
        if dialect not in ("sqlite", "postgres"):
            raise ValueError("dialect is sqlite or postgres")
        self.conn = conn
        self.dialect = dialect
        self.indexed = indexed
        self.p = "?" if dialect == "sqlite" else "%s"

    @classmethod
    def sqlite(cls, path: Path, *, indexed: bool) -> SqlStore:
        import sqlite3

        conn = sqlite3.connect(str(path), isolation_level=None, timeout=60)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL without an fsync per commit
        return cls(conn, dialect="sqlite", indexed=indexed)

    @classmethod
    def postgres(cls, conninfo: str, *, indexed: bool) -> SqlStore:
        import psycopg

        return cls(psycopg.connect(conninfo, autocommit=True), dialect="postgres", indexed=indexed)

    def close(self) -> None:
        self.conn.close()

    def create_schema(self) -> None:
        key = " PRIMARY KEY" if self.indexed else ""
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS sessions (sid TEXT NOT NULL{key}, "
                          "data TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL)")
        if self.indexed:
            self.conn.execute("CREATE INDEX IF NOT EXISTS sessions_expires ON sessions (expires)")

    def load(self, sid: str, now: float) -> dict[str, Any] | None:
        row = self.conn.execute(f"SELECT data FROM sessions WHERE sid = {self.p} AND expires > {self.p}",
                                (sid, now)).fetchone()
        if row is None:
            return None
        data: dict[str, Any] = json.loads(row[0])
        return data

    def save(self, sid: str, data: dict[str, Any], expires: float) -> None:
        text = encode(data)
        cur = self.conn.execute(f"UPDATE sessions SET data = {self.p}, expires = {self.p} WHERE sid = {self.p}",
                                (text, expires, sid))
        if cur.rowcount == 0:
            self.conn.execute(f"INSERT INTO sessions (sid, data, expires) VALUES ({self.p}, {self.p}, {self.p})",
                              (sid, text, expires))

    def delete(self, sid: str) -> None:
        self.conn.execute(f"DELETE FROM sessions WHERE sid = {self.p}", (sid,))

    def fill(self, rows: Iterable[Row]) -> int:
        return self.fill_encoded((sid, encode(data), expires) for sid, data, expires in rows)

    def fill_encoded(self, rows: Iterable[tuple[str, str, float]]) -> int:
        """Bulk load, the data already JSON text: one transaction and executemany
        (SQLite), COPY (PostgreSQL)."""
        if self.dialect == "sqlite":
            listed = list(rows)
            self.conn.execute("BEGIN")
            try:
                self.conn.executemany("INSERT INTO sessions (sid, data, expires) VALUES (?, ?, ?)", listed)
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            return len(listed)
        count = 0
        with self.conn.cursor() as cur, cur.copy("COPY sessions (sid, data, expires) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        return count

    def sweep(self, as_of: float) -> int:
        """The housekeeping DELETE: every row that expired before as_of."""
        cur = self.conn.execute(f"DELETE FROM sessions WHERE expires < {self.p}", (as_of,))
        return int(cur.rowcount)

    def size(self) -> int:
        if self.dialect == "sqlite":
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
            page = self.conn.execute("PRAGMA page_size").fetchone()[0]
            return int(pages) * int(page)
        return int(self.conn.execute("SELECT pg_total_relation_size('sessions')").fetchone()[0])
