"""RDB dumps: what a file's header says, and which server of the matrix reads it.

Everything about RDB versions lives here (the analyzer's `--rdb` decides with it). A dump
opens with a magic and its format version in ASCII: `REDIS` + 4 digits (`REDIS0011`), or,
from Valkey 9.0 on, `VALKEY` + 3 digits (`VALKEY080`). Then come aux fields (opcode 0xFA,
two RDB strings each): `redis-ver` from Redis, `valkey-ver` from Valkey (8.0 and 9.1
write no `redis-ver`; should one write both, `valkey-ver` wins), which name the writer.
Nothing else is read.

A server loads a dump whose version is at most its own, the one it writes; Valkey keeps
12-79 as a "foreign" range (Redis 7.4 and later use it) that it refuses under its default
`rdb-version-check strict`, and uses 80 and up from 9.0 on. WRITERS lists the version
each line writes. Checked on the real binaries (a dump of 4 keys written by each of
redis-7.0 7.0.15, redis-7.4 7.4.1, redis-8.0 8.0.2, valkey-8.0 8.0.1 and valkey-9.1
9.1.2, its header read, then loaded into each of the five): they wrote REDIS0010,
REDIS0012, REDIS0012, REDIS0011 and VALKEY080, and the 25 loads went as `reads` says
(a refusal is "Can't handle RDB format version N", or "Wrong signature" for VALKEY on
Redis and Valkey 8). tests/behaviour/test_analyze_rdb.py keeps the written versions.
Pure: no process is started and no file is opened here but the one `read_header` reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: Bytes read from a dump's start: the header and the aux fields that follow it.
HEAD_BYTES = 4096
AUX = 0xFA
FOREIGN = range(12, 80)  # Valkey's name for the versions Redis took after 11

#: (flavor, first version of a line, the RDB version it writes, the lines in words), oldest
#: first per flavor. The words claim no more than is known: Redis after 8.0 and Valkey
#: after 9.2 are not listed (a newer version is "newer than any known here").
WRITERS: tuple[tuple[str, tuple[int, int], int, str], ...] = (
    ("redis", (2, 6), 6, "Redis 2.6 to 3.0"),
    ("redis", (3, 2), 7, "Redis 3.2"),
    ("redis", (4, 0), 8, "Redis 4.0"),
    ("redis", (5, 0), 9, "Redis 5.0 to 6.2"),
    ("redis", (7, 0), 10, "Redis 7.0"),
    ("redis", (7, 2), 11, "Redis 7.2"),
    ("redis", (7, 4), 12, "Redis 7.4 to 8.0"),
    ("valkey", (7, 2), 11, "Valkey 7.2 to 8.1"),
    ("valkey", (9, 0), 80, "Valkey 9.0 and 9.1"),
    ("valkey", (9, 2), 81, "Valkey 9.2"),
)


class NotRdb(ValueError):
    """The file does not start as an RDB dump does."""


@dataclass(frozen=True)
class RdbHeader:
    version: int  # the RDB format version
    magic: str  # "REDIS" | "VALKEY"
    writer_flavor: str | None  # from the aux fields: "redis" | "valkey" | None (not said)
    writer_version: str | None  # "7.0.15"

    @property
    def writer(self) -> str:
        """Who wrote it, as the header says, else as its version implies."""
        if self.writer_flavor and self.writer_version:
            return f"{self.writer_flavor} {self.writer_version}"
        return writers_of(self.version)


def parse_header(head: bytes) -> RdbHeader:
    """The header of a dump from its first bytes (HEAD_BYTES are plenty); NotRdb if none."""
    found = re.match(rb"(REDIS)(\d{4})|(VALKEY)(\d{3})", head)
    if found is None:
        raise NotRdb("no REDIS or VALKEY header")
    magic = (found.group(1) or found.group(3)).decode()
    version = int(found.group(2) or found.group(4))
    aux = _aux_fields(head, found.end())
    if "valkey-ver" in aux:
        flavor, ver = "valkey", aux["valkey-ver"]
    elif "redis-ver" in aux:
        flavor, ver = "redis", aux["redis-ver"]
    else:
        flavor, ver = None, None
    return RdbHeader(version, magic, flavor, ver)


def read_header(path: Path) -> RdbHeader:
    with open(path, "rb") as fh:
        return parse_header(fh.read(HEAD_BYTES))


def _aux_fields(data: bytes, at: int) -> dict[str, str]:
    """The aux fields at the start of a dump (as many as `data` holds whole)."""
    out: dict[str, str] = {}
    try:
        while at < len(data) and data[at] == AUX:
            key, at = _string(data, at + 1)
            value, at = _string(data, at)
            out[key] = value
    except IndexError:  # the fields go on past what was read
        pass
    return out


def _string(data: bytes, at: int) -> tuple[str, int]:
    """One RDB string (length-prefixed, or an integer encoding; LZF is skipped as '').
    IndexError when it goes on past `data`, or is not a string."""
    first = data[at]
    if first >> 6 != 3:
        n, at = _length(data, at)
        return _take(data, at, n).decode(errors="replace"), at + n
    low = first & 0x3F
    if low in (0, 1, 2):  # an integer of 1, 2 or 4 bytes, little-endian
        width = 1 << low
        return str(int.from_bytes(_take(data, at + 1, width), "little", signed=True)), at + 1 + width
    if low == 3:  # LZF: compressed length, length, data
        clen, at = _length(data, at + 1)
        _, at = _length(data, at)
        _take(data, at, clen)
        return "", at + clen
    raise IndexError(at)


def _take(data: bytes, at: int, n: int) -> bytes:
    if at + n > len(data):
        raise IndexError(at)
    return data[at: at + n]


def _length(data: bytes, at: int) -> tuple[int, int]:
    """An RDB length: 6 bits, 14 bits, or 32 / 64 bits big-endian after 0x80 / 0x81."""
    first = data[at]
    kind, low = first >> 6, first & 0x3F
    if kind == 0:
        return low, at + 1
    if kind == 1:
        return (low << 8) | data[at + 1], at + 2
    width = 4 if first == 0x80 else 8
    return int.from_bytes(_take(data, at + 1, width), "big"), at + 1 + width


def version_tuple(version: str) -> tuple[int, int]:
    """"7.4.1" -> (7, 4); what is not a number counts as 0."""
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:2]]
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


def writes(flavor: str, version: str) -> int | None:
    """The RDB version a server of this flavor and version writes (None: older than known)."""
    line = version_tuple(version)
    written = None
    for fl, first, rdb, _ in WRITERS:
        if fl == flavor and line >= first:
            written = rdb
    return written


def reads(flavor: str, version: str, rdb: int) -> bool:
    """Whether a server of this flavor and version loads a dump of RDB version `rdb` (by
    default: Valkey's `rdb-version-check strict`)."""
    own = writes(flavor, version)
    if own is None or rdb < 1 or rdb > own:
        return False
    return not (flavor == "valkey" and rdb in FOREIGN)


def writers_of(rdb: int) -> str:
    """Which servers write RDB version `rdb`, in words ("Redis 7.2 or Valkey 7.2 to 8.1")."""
    names = [words for _, _, v, words in WRITERS if v == rdb]
    if names:
        return " or ".join(names)
    if 1 <= rdb < WRITERS[0][2]:
        return "a Redis older than 2.6"
    if rdb in FOREIGN and rdb > max(v for fl, _, v, _ in WRITERS if fl == "redis"):
        return "a Redis newer than any known here"
    if rdb > max(v for fl, _, v, _ in WRITERS if fl == "valkey"):
        return "a Valkey newer than any known here"
    return "no known server"
