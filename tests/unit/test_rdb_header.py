"""Which server of the matrix reads a dump (`densekv analyze --rdb`), decided from its
header alone: the header and aux fields parsed from bytes, the read rule per server line
(Valkey refuses Redis's 12-79 by default), the reader chosen for a set of dumps, and the
one-line refusal naming what would read it. No server, no file but tmp_path's."""

from __future__ import annotations

from pathlib import Path

import pytest

from densekv.errors import AnalyzeError
from densekv.tools.analyze.offline import Dump, choose_reader, read_dumps
from densekv.tools.server.binaries import ServerBinary
from densekv.tools.server.rdb import NotRdb, RdbHeader, parse_header, reads, writers_of, writes


def _s(text: str) -> bytes:
    return bytes([len(text)]) + text.encode()


def _aux(key: str, value: bytes) -> bytes:
    return b"\xfa" + _s(key) + value


REDIS70 = b"REDIS0010" + _aux("redis-ver", _s("7.0.15")) + _aux("redis-bits", b"\xc0\x40") + b"\xfe\x00"
VALKEY91 = b"VALKEY080" + _aux("valkey-ver", _s("9.1.2")) + _aux("redis-ver", _s("7.2.4")) + b"\xfe\x00"  # both: valkey
VALKEY80 = b"REDIS0011" + _aux("valkey-ver", _s("8.0.1")) + _aux("redis-bits", b"\xc0\x40")
REDIS74_CUT = b"REDIS0012" + _aux("redis-ver", _s("7.4.1"))[:-3]  # the fields go on past what was read


@pytest.mark.parametrize(("head", "want"), [
    (REDIS70, RdbHeader(10, "REDIS", "redis", "7.0.15")),
    (VALKEY91, RdbHeader(80, "VALKEY", "valkey", "9.1.2")),
    (VALKEY80, RdbHeader(11, "REDIS", "valkey", "8.0.1")),
    (REDIS74_CUT, RdbHeader(12, "REDIS", None, None)),
    (b"REDIS0009\xff", RdbHeader(9, "REDIS", None, None)),
])
def test_header(head: bytes, want: RdbHeader) -> None:
    assert parse_header(head) == want


@pytest.mark.parametrize("head", [b"", b"REDIS", b"REDIS00x1", b"VALKEY08", b"hello world\n", b"\x00" * 64,
                                  b"*2\r\n$6\r\nSELECT\r\n"])
def test_not_a_dump(head: bytes) -> None:
    with pytest.raises(NotRdb):
        parse_header(head)


@pytest.mark.parametrize(("flavor", "version", "want"), [
    ("redis", "7.0.15", 10), ("redis", "7.2.4", 11), ("redis", "7.4.1", 12), ("redis", "8.0.2", 12),
    ("valkey", "8.0.1", 11), ("valkey", "8.1.1", 11), ("valkey", "9.0.0", 80), ("valkey", "9.1.2", 80),
    ("valkey", "9.2.0", 81), ("redis", "2.4.0", None),
])
def test_writes(flavor: str, version: str, want: int | None) -> None:
    assert writes(flavor, version) == want


@pytest.mark.parametrize(("flavor", "version", "rdb", "want"), [
    ("redis", "7.0.15", 9, True), ("redis", "7.0.15", 10, True), ("redis", "7.0.15", 11, False),
    ("redis", "7.4.1", 11, True), ("redis", "7.4.1", 12, True), ("redis", "7.4.1", 80, False),
    ("valkey", "8.0.1", 11, True), ("valkey", "8.0.1", 12, False), ("valkey", "8.0.1", 80, False),
    ("valkey", "9.1.2", 10, True), ("valkey", "9.1.2", 11, True), ("valkey", "9.1.2", 12, False),
    ("valkey", "9.1.2", 79, False), ("valkey", "9.1.2", 80, True), ("valkey", "9.1.2", 81, False),
    ("redis", "7.0.15", 0, False),
])
def test_reads(flavor: str, version: str, rdb: int, want: bool) -> None:
    assert reads(flavor, version, rdb) is want


@pytest.mark.parametrize(("rdb", "want"), [
    (10, "Redis 7.0"), (11, "Redis 7.2 or Valkey 7.2 to 8.1"), (12, "Redis 7.4 to 8.0"),
    (13, "a Redis newer than any known here"), (80, "Valkey 9.0 and 9.1"), (81, "Valkey 9.2"),
    (90, "a Valkey newer than any known here"), (3, "a Redis older than 2.6"),
])
def test_writers_of(rdb: int, want: str) -> None:
    assert writers_of(rdb) == want


def _binary(name: str, version: str) -> ServerBinary:
    return ServerBinary(name, Path("/nonexistent") / name, name.partition("-")[0], version, "jemalloc")


MATRIX_HERE = {b.name: b for b in (_binary("redis-7.0", "7.0.15"), _binary("redis-7.4", "7.4.1"),
                                   _binary("valkey-8.0", "8.0.1"), _binary("valkey-9.1", "9.1.2"))}


def _dump(head: bytes, name: str = "dump.rdb") -> Dump:
    return Dump(Path(name), parse_header(head))


@pytest.mark.parametrize(("heads", "want"), [
    ((REDIS70,), "redis-7.0"),  # its own line
    ((VALKEY80,), "valkey-8.0"),
    ((VALKEY91,), "valkey-9.1"),
    ((b"REDIS0012" + _aux("redis-ver", _s("7.4.1")),), "redis-7.4"),
    ((b"REDIS0011" + _aux("redis-ver", _s("7.2.4")),), "redis-7.4"),  # Redis 7.2: the closest line reading 11
    ((b"REDIS0009",), "redis-7.0"),  # no writer named: the oldest Redis that reads it
    ((REDIS70, VALKEY80), "valkey-8.0"),  # one server for all: the newest dump's writer decides
])
def test_reader(heads: tuple[bytes, ...], want: str) -> None:
    assert choose_reader([_dump(h) for h in heads], MATRIX_HERE).name == want


def test_reader_falls_back_to_the_same_flavor() -> None:
    present = {k: v for k, v in MATRIX_HERE.items() if k != "valkey-8.0"}
    assert choose_reader([_dump(VALKEY80)], present).name == "valkey-9.1"


@pytest.mark.parametrize(("head", "present", "words"), [
    (b"REDIS0012" + _aux("redis-ver", _s("7.4.1")), ("redis-7.0", "valkey-8.0", "valkey-9.1"),
     ["dump.rdb is RDB version 12, written by redis 7.4.1: no server here reads it",
      "redis-7.4 (scripts/get-servers) or redis-8.0 (scripts/get-servers --only redis-8.0) would read it"]),
    (b"VALKEY081", tuple(MATRIX_HERE),
     ["RDB version 81, written by Valkey 9.2", "(Valkey 9.2); none of the matrix does"]),
    (b"REDIS0013", tuple(MATRIX_HERE), ["RDB version 13", "a Redis newer than any known here"]),
])
def test_unreadable_is_one_line_naming_what_reads_it(head: bytes, present: tuple[str, ...],
                                                      words: list[str]) -> None:
    with pytest.raises(AnalyzeError) as err:
        choose_reader([_dump(head)], {n: MATRIX_HERE[n] for n in present})
    text = str(err.value)
    assert "\n" not in text and all(w in text for w in words), text


def test_no_one_server_reads_both() -> None:
    present = {n: MATRIX_HERE[n] for n in ("redis-7.4", "valkey-9.1")}
    with pytest.raises(AnalyzeError, match="no one server here reads all of a.rdb .RDB 12., b.rdb .RDB 80."):
        choose_reader([_dump(b"REDIS0012", "a.rdb"), _dump(VALKEY91, "b.rdb")], present)


def test_read_dumps(tmp_path: Path) -> None:
    (tmp_path / "a.rdb").write_bytes(REDIS70)
    (tmp_path / "notes.txt").write_text("not a dump\n")
    assert read_dumps([str(tmp_path / "a.rdb")])[0].header.version == 10
    with pytest.raises(AnalyzeError, match="notes.txt is not an RDB dump"):
        read_dumps([str(tmp_path / "notes.txt")])
    with pytest.raises(AnalyzeError, match="given twice"):
        read_dumps([str(tmp_path / "a.rdb"), str(tmp_path / ".." / tmp_path.name / "a.rdb")])
