"""The lab stopped with Ctrl-C, and a database an earlier lab left behind: what is
written, what is removed, and what a later run does with the leftovers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from densekv.errors import LabRefused
from densekv.tools.lab.runner import LabConfig, run_lab
from densekv.tools.lab.target import MARK_KEY
from densekv.tools.server.process import ServerProcess

SMALL = {"small_sets": {"keys": 2, "top": 600, "structures": ("hash",)}}


#: `python -m densekv.tools.lab ...` with Ctrl-C raising KeyboardInterrupt, whatever the suite inherited
LAB_WITH_CTRL_C = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                   "runpy.run_module('densekv.tools.lab', run_name='__main__')")


def _flushes(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_flushdb", {}).get("calls", 0))


def test_ctrl_c_writes_a_partial_report_removes_the_labs_keys_and_exits_130(
    fresh_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    proc = fresh_server("valkey-9.1")
    url = proc.url.rsplit("/", 1)[0] + "/7"
    watch = proc.client()
    # Ctrl-C as in a terminal: a suite started in the background of a non-interactive shell
    # (`pytest &`, nohup) ignores SIGINT, and a child inherits that and never hears it
    lab = subprocess.Popen([sys.executable, "-c", LAB_WITH_CTRL_C, "--url", url, "--n", "2000", "--only", "sessions",
                            "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    # each session layout starts with a flush of the lab's database: the second flush means
    # the first layout is measured and recorded, and the second is being loaded
    while _flushes(watch) < 2 and lab.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lab.poll() is None, lab.communicate()
    lab.send_signal(signal.SIGINT)
    _, err = lab.communicate(timeout=60)
    assert lab.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted: partial report" in lines[0] and "keys were removed" in lines[0], err
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["interrupted"] is True
    entry = next(e for e in doc["experiments"] if e["kind"] == "sessions")
    assert entry["status"] == "interrupted"
    assert [r["variant"] for r in doc["runs"] if r["kind"] == "sessions"][:1] == ["dense"]  # what was measured
    html = (tmp_path / "report.html").read_text()
    assert "Interrupted (Ctrl-C)" in html and "Measured before the interruption" in html
    with redis.Redis(host="127.0.0.1", port=proc.port, db=7) as lab_db:
        assert lab_db.dbsize() == 0  # the lab's keys, its mark included, are gone
    watch.close()


def test_leftovers_of_a_killed_lab_are_named_cleaned_and_the_database_reused(
    fresh_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    proc = fresh_server("valkey-9.1")
    url = proc.url.rsplit("/", 1)[0] + "/9"
    with redis.Redis(host="127.0.0.1", port=proc.port, db=9) as lab_db:
        lab_db.set(MARK_KEY, json.dumps({"by": "densekv lab", "host": "another-machine", "pid": 4242,
                                         "started": "2026-01-01T00:00:00Z"}))
        lab_db.mset({f"lab:ss:hash:{i}": "x" for i in range(31)})  # 32 keys, as the issue found
        run = run_lab(LabConfig(url=url, n=1000, out=tmp_path, only=("small_sets",), options=SMALL))
        assert len(run.cleaned) == 1 and "held 32 keys left by an earlier densekv lab run" in run.cleaned[0]
        assert run.failed == [] and {r["kind"] for r in run.doc["runs"]} == {"small_sets"}
        assert "left by an earlier densekv lab run" in (tmp_path / "report.html").read_text()
        assert lab_db.dbsize() == 0


def test_a_database_a_running_lab_is_using_is_refused(fresh_server: Callable[..., ServerProcess],
                                                      tmp_path: Path) -> None:
    proc = fresh_server("valkey-9.1")
    url = proc.url.rsplit("/", 1)[0] + "/9"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a lab running now
    try:
        with redis.Redis(host="127.0.0.1", port=proc.port, db=9) as lab_db:
            lab_db.set(MARK_KEY, json.dumps({"by": "densekv lab", "host": socket.gethostname(), "pid": other.pid,
                                             "started": "2026-01-01T00:00:00Z"}))
            lab_db.set("lab:ss:hash:0", "x")
            with pytest.raises(LabRefused, match=rf"in use by a densekv lab running now \(pid {other.pid}\)"):
                run_lab(LabConfig(url=url, n=1000, out=tmp_path, only=("small_sets",), options=SMALL))
            assert lab_db.dbsize() == 2  # nothing removed
    finally:
        other.kill()
        other.wait()


def test_the_labs_mark_is_in_its_database_while_it_runs(
    fresh_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    proc = fresh_server("valkey-9.1")
    url = proc.url.rsplit("/", 1)[0] + "/5"
    seen: list[bytes | None] = []
    from densekv.tools.lab.runner import Display

    class Peek(Display):
        def record(self, record: object) -> None:
            with redis.Redis(host="127.0.0.1", port=proc.port, db=5) as lab_db:
                seen.append(lab_db.get(MARK_KEY))

    run = run_lab(LabConfig(url=url, n=1000, out=tmp_path, only=("small_sets",), options=SMALL), Peek())
    assert seen and all(v is not None and json.loads(v)["pid"] == os.getpid() for v in seen)
    hashes = [r for r in run.doc["runs"] if r["layout"] == "hash"]
    assert all(0 < r["bytes_per_item"] < 200 for r in hashes)  # per entry: no stray key's cost inside
