"""`densekv analyze --rdb FILE...`: dumps analyzed offline, each in a throwaway server.

Nothing is sent to any server but ours. Each dump is copied into a temporary directory as
the `dbfilename` of a server of the matrix started there on loopback (`--save ''`,
`--appendonly no`: it never writes a dump back), which loads it as it starts; the
analysis then runs on these servers as on a live one (scan.py, through wire.py's
read-only commands) and they are stopped, their directories removed, when it ends (or
when this process dies: server/process.py). Keys whose TTL ran out since the dump was
taken are not loaded, as a server restarting from it would not load them.

Which server: one that reads the RDB version of every dump (server/rdb.py decides; a
file that is not a dump, or a version no server here reads, is one line naming what
would read it), and of those the closest to the dump's writer (replay.stand_ins, the
same line first; then the same flavor, the nearest version), so MEMORY USAGE prices the
keys as the writer's line does. The report names the dumps, their writer and the server.

Several dumps (a cluster's primaries): one throwaway server each, started as a cluster
node of its own (cluster-enabled, which takes the slots of the keys it loads, reads served
while the rest of the slots are uncovered), so MEMORY USAGE prices each key as a cluster
node of the writer's line does: Redis 7.0 and 7.2 keep every key of a cluster node on its
slot's list, 16 bytes more a key (an integer 72 bytes against 56 standalone on redis-7.0;
loaded into standalone servers, a redis-7.0 cluster's small keys read 8-22% low). Analyzed
as one keyspace. The analyzer already scans many nodes as one (every primary of a cluster), so
each server is one node of the Target; the per-key figures and the per-node scale model
of the replay stay those of a node holding one dump. One server for all would need every
key of all but one dump sent again by RESTORE (a server loads one file as it starts),
and would price them in one dictionary as large as all of them.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from densekv.errors import AnalyzeError, ServerStartFailed
from densekv.tools.analyze.replay import stand_ins
from densekv.tools.analyze.scan import Target, open_target
from densekv.tools.server.binaries import MATRIX, NEWER, ServerBinary, find_servers
from densekv.tools.server.cluster import cluster_port
from densekv.tools.server.process import ServerProcess
from densekv.tools.server.rdb import (
    NotRdb,
    RdbHeader,
    read_header,
    reads,
    version_tuple,
    writers_of,
)

DBFILENAME = "dump.rdb"
LOAD_RATE = 20e6  # bytes per second a server loads at least: the start's timeout grows with the file
LOAD_MIN_SECONDS = 30.0


@dataclass(frozen=True)
class Dump:
    path: Path
    header: RdbHeader

    def describe(self) -> dict[str, Any]:
        return {"file": str(self.path), "rdb_version": self.header.version, "written_by": self.header.writer}


def read_dumps(paths: Sequence[str]) -> list[Dump]:
    """Each file's header; one line for a file that is not a dump, or given twice."""
    out: list[Dump] = []
    seen: set[Path] = set()
    for name in paths:
        path = Path(name)
        real = path.resolve()
        if real in seen:
            raise AnalyzeError(f"{name} is given twice: give each primary's dump once")
        seen.add(real)
        try:
            header = read_header(path)
        except NotRdb:
            raise AnalyzeError(f"{name} is not an RDB dump (it does not start with REDIS or VALKEY and a "
                               "format version)") from None
        except OSError as exc:
            raise AnalyzeError(f"cannot read {name}: {exc.strerror}") from None
        out.append(Dump(path, header))
    return out


def _line(name: str) -> tuple[str, str]:
    """("redis", "7.4") for the matrix name "redis-7.4"."""
    flavor, _, version = name.partition("-")
    return flavor, version


def _would_read(rdb: int) -> str:
    """What would read RDB version `rdb`: servers of the matrix not fetched here, or the
    line that writes it."""
    fetch = [f"{n} ({'scripts/get-servers' if n in MATRIX else f'scripts/get-servers --only {n}'})"
             for n in (*MATRIX, *NEWER) if reads(*_line(n), rdb)]
    if fetch:
        return f"{' or '.join(fetch)} would read it"
    return f"only a server that writes it would read it ({writers_of(rdb)}); none of the matrix does"


def choose_reader(dumps: Sequence[Dump], present: Mapping[str, ServerBinary]) -> ServerBinary:
    """The server of the matrix present here that loads the dumps (see the module docstring)."""
    versions = sorted({d.header.version for d in dumps})
    readers = {name: b for name, b in present.items() if all(reads(b.flavor, b.version, v) for v in versions)}
    if not readers:
        alone = [d for d in dumps if not any(reads(b.flavor, b.version, d.header.version) for b in present.values())]
        if alone:
            d = alone[0]
            raise AnalyzeError(f"{d.path} is RDB version {d.header.version}, written by {d.header.writer}: no server "
                               f"here reads it; {_would_read(d.header.version)}")
        listed = ", ".join(f"{d.path} (RDB {d.header.version})" for d in dumps)
        raise AnalyzeError(f"no one server here reads all of {listed}: analyze them apart")
    newest = max(dumps, key=lambda d: d.header.version).header
    if newest.writer_flavor and newest.writer_version:
        for name in stand_ins(newest.writer_flavor, newest.writer_version):
            if name in readers:
                return readers[name]
    flavor = newest.writer_flavor or ("valkey" if newest.magic == "VALKEY" else "redis")
    major, minor = version_tuple(newest.writer_version or "0.0")

    def distance(b: ServerBinary) -> tuple[bool, int, str]:
        bmajor, bminor = version_tuple(b.version)
        return b.flavor != flavor, abs((bmajor - major) * 100 + bminor - minor), b.name

    return min(readers.values(), key=distance)


#: a throwaway cluster node's options (module docstring): its own nodes.conf in its directory
CLUSTER_NODE = {"cluster-enabled": "yes", "cluster-config-file": "nodes.conf",
                "cluster-require-full-coverage": "no", "cluster-allow-reads-when-down": "yes"}


def _start(binary: ServerBinary, dump: Dump, cluster: bool = False) -> ServerProcess:
    proc = (ServerProcess(binary, port=cluster_port(), options={"dbfilename": DBFILENAME, **CLUSTER_NODE})
            if cluster else ServerProcess(binary, options={"dbfilename": DBFILENAME}))
    try:
        shutil.copyfile(dump.path, proc.dir / DBFILENAME)
        timeout = max(LOAD_MIN_SECONDS, (proc.dir / DBFILENAME).stat().st_size / LOAD_RATE)
        return proc.start(timeout=timeout)
    except OSError as exc:
        proc.stop()
        raise AnalyzeError(f"cannot copy {dump.path} into a temporary directory: {exc.strerror}") from None
    except ServerStartFailed as exc:  # start() stopped it
        why = f"still loading after {timeout:.0f} s" if "did not answer within" in str(exc) else \
            load_error(str(exc))
        raise AnalyzeError(f"{binary.name} could not load {dump.path} (RDB {dump.header.version}): {why}") from None


#: words of a server's log line that says why a dump did not load
_LOAD_WORDS = ("RDB", "read", "load", "module", "checksum", "format", "version")


def load_error(text: str) -> str:
    """The server's own reason from a failed start's message (its log lines, " | "-joined,
    each "pid:role date time # reason"): the first reason about loading, else the last."""
    reasons = [seg.split(" # ", 1)[1].strip() for seg in text.split(" | ") if " # " in seg]
    about = [r for r in reasons if any(w in r for w in _LOAD_WORDS)]
    return (about or reasons or [text[-200:]])[0]


def _other_dbs(proc: ServerProcess, db: int) -> dict[int, int]:
    """Keys per database of a throwaway server other than `db` (INFO keyspace)."""
    with proc.client() as client:
        info = client.info("keyspace")
    out: dict[int, int] = {}
    for name, stats in info.items():
        n = int(str(name)[2:]) if str(name).startswith("db") else -1
        if n != db and isinstance(stats, dict):
            out[n] = int(stats.get("keys", 0))
    return out


@contextlib.contextmanager
def loaded(paths: Sequence[str], db: int = 0) -> Iterator[tuple[Target, dict[str, Any]]]:
    """The dumps loaded, each in its own throwaway server, as one Target (its nodes named
    by file), and what the report says of them: {files, server, version, other_dbs}."""
    dumps = read_dumps(paths)
    binary = choose_reader(dumps, find_servers())
    procs: list[ServerProcess] = []
    targets: list[Target] = []
    try:
        for dump in dumps:
            procs.append(_start(binary, dump, cluster=len(dumps) > 1))
        other: dict[str, dict[int, int]] = {}
        for dump, proc in zip(dumps, procs):
            target = open_target(f"redis://127.0.0.1:{proc.port}/{db}")
            targets.append(target)
            target.nodes[0].addr = str(dump.path)
            others = {n: k for n, k in _other_dbs(proc, db).items() if k}
            if others:
                other[str(dump.path)] = others
        first = targets[0]
        label = ", ".join(str(d.path) for d in dumps)
        merged = Target(label, first.flavor, first.version, len(dumps) > 1,
                        [n for t in targets for n in t.nodes], db)
        yield merged, {"files": [d.describe() for d in dumps], "server": binary.name, "version": first.version,
                       "db": db, "other_dbs": other}
    finally:
        for t in targets:
            t.close()
        for proc in procs:
            proc.stop()
