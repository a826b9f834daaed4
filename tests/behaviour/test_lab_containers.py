"""Session containers (issue 12) through the real app: each container's get/set/expiry
contract with a real gunicorn process, the harness's fills readable by the app and its
sweeps removing exactly the expired half, every process gone after an error or Ctrl-C,
a missing PostgreSQL as a one-line note, and the lab experiment's report."""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flask")
pytest.importorskip("gunicorn")

from densekv.tools.lab.containers import harness
from densekv.tools.lab.containers.config import AppConfig
from densekv.tools.lab.containers.harness import Plan, Run, run_containers, why_not
from densekv.tools.lab.containers.load import python_load
from densekv.tools.lab.containers.processes import AppServer
from densekv.tools.lab.containers.stores import SqlStore
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

LIFETIME = 3  # seconds: short enough to watch sessions expire
CONTRACT = ("dict", "files-hashed", "sqlite-unindexed", "redis-json", "densekv", "memcached", "postgres-indexed")


@pytest.fixture
def rundir() -> Iterator[Path]:
    """A run's directory under /tmp: PostgreSQL runs as another account when we are root,
    and pytest's own tmp_path (mode 0700) would shut it out."""
    path = Path(tempfile.mkdtemp(prefix="densekv-test-containers-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def valkey() -> Iterator[ServerProcess]:
    with ServerProcess(find_servers()["valkey-9.1"]) as proc:
        yield proc


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped by init counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


class Browser:
    """One visitor: keeps its cookies between requests."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str, cookie: str | None = None) -> tuple[str, str | None]:
        req = urllib.request.Request(self.base + path)
        if cookie is not None:
            req.add_header("Cookie", f"session={cookie}")
        with self.opener.open(req, timeout=10) as r:
            return r.read().decode(), r.headers.get("Set-Cookie")


@pytest.fixture(scope="module")
def apps(valkey: ServerProcess) -> Iterator[dict[str, Any]]:
    """Every contract container this machine can run, each behind its own gunicorn,
    started together; the ones it cannot run map to the reason (one line)."""
    rundir = Path(tempfile.mkdtemp(prefix="densekv-test-containers-"))
    out: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, rundir, True)
        client = valkey.client()
        stack.callback(client.close)
        plan = Plan(CONTRACT, (0,), lifetime=LIFETIME)
        run = Run(plan, rundir, redis_url=valkey.url, client=client, meter=None)
        started = []
        for name in CONTRACT:
            reason = why_not(name, valkey.url)
            if reason:
                out[name] = reason
                continue
            home = rundir / name
            home.mkdir()
            backend, config = run._backend(stack, harness.container(name), AppConfig(name, home, lifetime=LIFETIME))
            stack.callback(backend.close)
            backend.prepare()
            started.append((name, stack.enter_context(AppServer(config, home).start(wait=False))))
        for name, app in started:
            app.ready()
            out[name] = app
        yield out


def app_of(apps: dict[str, Any], name: str) -> AppServer:
    app = apps[name]
    if isinstance(app, str):
        pytest.skip(f"{name}: not measured here - {app}")
    return app  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", CONTRACT)
def test_a_session_is_set_read_back_and_kept_apart(apps: dict[str, Any], name: str) -> None:
    app = app_of(apps, name)
    alice, bob = Browser(app.url), Browser(app.url)
    assert alice.get("/r") == ("miss", None)  # reading no session creates none
    body, cookie = alice.get("/w")
    assert body == "new 1" and cookie is not None and cookie.startswith("session=")
    assert alice.get("/w")[0] == "hit 2"
    assert alice.get("/set?color=blue")[0] == "ok"
    assert alice.get("/r")[0] == "hit"
    assert json.loads(alice.get("/dump")[0]) == {"hits": 2, "color": "blue"}
    assert bob.get("/w")[0] == "new 1"  # another visitor, another session
    assert json.loads(alice.get("/dump")[0]) == {"hits": 2, "color": "blue"}


@pytest.mark.parametrize("junk", ["x", "../../../../etc/passwd", "A" * 43 + "/", "%00" * 20])
@pytest.mark.parametrize("name", ("dict", "files-hashed", "densekv"))
def test_a_junk_cookie_is_no_session(apps: dict[str, Any], name: str, junk: str) -> None:
    app = app_of(apps, name)
    assert Browser(app.url).get("/r", cookie=junk) == ("miss", None)


@pytest.fixture(scope="module")
def expiring(apps: dict[str, Any]) -> dict[str, tuple[Browser, float]]:
    """One session per running container, created together (and read back at once), and when."""
    out = {}
    for name, app in apps.items():
        if isinstance(app, AppServer):
            browser = Browser(app.url)
            assert browser.get("/w")[0] == "new 1"
            out[name] = (browser, time.monotonic())
    for name, (browser, _) in out.items():
        assert browser.get("/r")[0] == "hit", name
    return out


@pytest.mark.parametrize("name", CONTRACT)
def test_a_session_expires_after_its_lifetime(apps: dict[str, Any], expiring: dict[str, tuple[Browser, float]],
                                              name: str) -> None:
    app_of(apps, name)
    browser, created = expiring[name]
    time.sleep(max(0.0, created + LIFETIME + 1.2 - time.monotonic()))
    assert browser.get("/r")[0] == "miss"


def test_the_harness_fills_what_the_app_reads_and_sweeps_exactly_the_expired_half(
        valkey: ServerProcess, rundir: Path) -> None:
    names = ("none", "dict", "files-flat", "sqlite-indexed", "redis-json", "densekv", "memcached",
             "postgres-unindexed")
    client = valkey.client()
    client.execute_command("FLUSHALL", "SYNC")  # the module's other apps share this server
    plan = Plan(names, (0, 40), active=20, requests=40, warmup=5, rounds=1, housekeeping="last",
                sweep_window_s=0.05)
    out = run_containers(plan, rundir, redis_url=valkey.url, client=client, meter=Meter(client, clear=True))
    measured = {r["container"] for r in out.records}
    assert measured | set(out.unmeasured) == set(names)
    assert {"none", "dict", "files-flat", "sqlite-indexed", "redis-json", "densekv"} <= measured
    for r in out.records:
        assert r["ro"]["requests"] >= 40 and r["ro"]["errors"] == 0, r
        if r["container"] != "none":
            assert r["ro"]["misses"] == 0, r  # every request found the session it named
        if r["n"] == 40 and r["container"] not in ("none", "dict", "memcached"):  # RSS is page-coarse
            assert r["bytes_per_session"] and r["bytes_per_session"] > 0, r
        hk = r["housekeeping"]
        if r["n"] == 40 and r["container"] in ("dict", "files-flat", "sqlite-indexed", "densekv", "postgres-unindexed"):
            assert hk is not None and hk["removed"] == 20 and hk["expired"] == 20, r
        else:
            assert hk is None, r
    assert len(out.notes) == len(out.unmeasured)
    client.close()


def test_the_python_fallback_load_counts_requests_and_misses(tmp_path: Path) -> None:
    with AppServer(AppConfig("dict", tmp_path), tmp_path) as app:
        result = python_load(app.url + "/r", ["A" * 43], 30, 10.0, 3, seed=1)
    assert result.generator == "python" and result.requests == 30 and result.misses == 30 and result.errors == 0


def test_an_error_inside_the_app_server_block_stops_gunicorn_and_its_worker(tmp_path: Path) -> None:
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"), AppServer(AppConfig("dict", tmp_path), tmp_path) as app:
        assert app.pid is not None
        pids = [app.pid, *app.worker_pids()]
        assert len(pids) == 2
        raise RuntimeError("boom")
    deadline = time.monotonic() + 5
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(gone(p) for p in pids), pids


def test_ctrl_c_in_the_middle_of_a_run_stops_every_process_it_started(valkey: ServerProcess, rundir: Path) -> None:
    names = ("dict", "sqlite-indexed", "densekv", "memcached", "postgres-indexed")
    client = valkey.client()
    run = Run(Plan(names, (0, 10), active=10, requests=20, warmup=0, rounds=1), rundir,
              redis_url=valkey.url, client=client, meter=Meter(client, clear=True))
    seen: list[int] = []

    def interrupt(message: str) -> None:
        if "round" in message:
            for slot in run.slots:
                assert slot.app is not None and slot.app.pid is not None
                seen.extend([slot.app.pid, *slot.app.worker_pids()])
            seen.extend(h.pid for h in run.helpers if h.pid is not None)
            raise KeyboardInterrupt

    run.say = interrupt
    with pytest.raises(KeyboardInterrupt):
        run.run()
    assert len(seen) >= 2 * 3
    deadline = time.monotonic() + 10
    while not all(gone(p) for p in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in seen if not gone(p)] == []
    client.close()


def test_a_missing_postgresql_is_a_one_line_note(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = harness.find_component
    monkeypatch.setattr(harness, "find_component", lambda name: None if name == "postgresql" else real(name))
    out = run_containers(Plan(("postgres-indexed", "none"), (0,), active=5, requests=10, warmup=0, rounds=1),
                         tmp_path)
    # one line naming what is missing: the server, or (first) its Python driver
    assert len(out.notes) == 1 and "\n" not in out.notes[0]
    assert out.notes[0] in (
        "postgres-indexed: not measured - no PostgreSQL on this machine (scripts/get-components fetches it)",
        "postgres-indexed: not measured - psycopg is not installed (pip install 'psycopg[binary]')",
    )
    assert out.unmeasured == ["postgres-indexed"]
    assert [r["container"] for r in out.records] == ["none"]


def test_sql_sweep_deletes_by_expiry_with_and_without_the_index(tmp_path: Path) -> None:
    for indexed in (True, False):
        store = SqlStore.sqlite(tmp_path / f"s{indexed}.sqlite3", indexed=indexed)
        store.create_schema()
        now = time.time()
        store.fill([(f"{'a' if i % 2 else 'b'}{i:042d}", {"i": i}, now + (10 if i % 2 else 1000)) for i in range(10)])
        assert store.sweep(now + 100) == 5
        assert store.load(f"b{0:042d}", now) == {"i": 0} and store.load(f"a{1:042d}", now) is None
        store.close()


def test_the_lab_experiment_draws_its_four_figures(valkey: ServerProcess, tmp_path: Path) -> None:
    from densekv.tools.lab.runner import LabConfig, run_lab

    config = LabConfig(n=1000, url=valkey.url + "", out=tmp_path, only=("containers",), options={
        "containers": {"containers": ("none", "dict", "densekv"),
                       "ns": (0, 60), "requests": 40, "rounds": 1, "warmup": 5, "active": 20}})
    with valkey.client() as c:
        c.execute_command("FLUSHALL", "SYNC")
    run = run_lab(config)
    assert not run.failed, [o.reason for o in run.failed]
    doc = json.loads((tmp_path / "results.json").read_text())
    runs = [r for r in doc["runs"] if r["kind"] == "containers"]  # one record per (container, N)
    assert {r["layout"] for r in runs} == {"none", "dict", "densekv"}
    assert sorted(p["n"] for r in runs if r["layout"] == "densekv" for p in r["points"]) == [0, 60]
    html = (tmp_path / "report.html").read_text()
    for name in ("rps", "p99", "bytes", "housekeeping"):
        assert (tmp_path / f"containers-url-{name}.png").is_file()
    assert "req/s" in html and "Bytes per stored session" in html


# -- seed 003's story in the lab: four N up to the lab's N, verdicts from the points ------------

CURVE_N = 20_000  # the test's "lab N": unindexed SQLite scans 20k rows per read, several times a read at N = 0


@pytest.fixture(scope="module")
def curve_run(valkey: ServerProcess) -> Iterator[Any]:
    from densekv.tools.lab.runner import LabConfig, run_lab

    out = Path(tempfile.mkdtemp(prefix="densekv-test-curve-"))
    with valkey.client() as c:
        c.execute_command("FLUSHALL", "SYNC")
    config = LabConfig(n=CURVE_N, url=valkey.url, out=out, only=("containers",), options={
        "containers": {"containers": ("none", "sqlite-unindexed", "densekv"), "requests": 40, "rounds": 1,
                       "warmup": 5, "active": 20}})
    try:
        yield run_lab(config)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_the_lab_measures_every_container_at_four_counts_up_to_its_n(curve_run: Any) -> None:
    assert not curve_run.failed, [o.reason for o in curve_run.failed]
    runs = [r for r in curve_run.doc["runs"] if r["kind"] == "containers"]
    by: dict[str, list[int]] = {}
    for r in runs:
        by.setdefault(r["layout"], []).append(r["n"])
    assert set(by) == {"none", "sqlite-unindexed", "densekv"}
    for ns in by.values():
        assert sorted(ns) == [0, CURVE_N // 100, CURVE_N // 10, CURVE_N]
    for r in runs:  # CPU per request measured beside req/s, at every point
        assert r["ops_per_s"] > 0 and r["server_usec_per_call"] > 0, r
        assert r["ops"]["read"]["app_cpu_us"] > 0, r


def test_the_verdicts_come_from_the_points(curve_run: Any) -> None:
    import copy

    from densekv.tools.lab.containers.findings import trends
    from densekv.tools.lab.summary import verdicts

    doc = curve_run.doc
    found = {t.container: t for t in trends(r for r in doc["runs"] if r["kind"] == "containers")}
    # a scan of 20k rows per read costs several times the request itself: unindexed SQL falls
    assert found["sqlite-unindexed"].verdict == "falls", found["sqlite-unindexed"].evidence
    mine = [v for v in verdicts(doc) if v.seed == "003"]
    assert len(mine) == 3
    for v in mine:
        t = next(t for t in found.values() if v.claim.startswith(f"that {t.label} "))
        assert v.measured.startswith(t.verdict) and (v.word == "confirmed") == t.agrees
    # the same document with densekv's CPU per read at the largest N made three times that at
    # the smallest (not three times its own: on a loaded machine the first point can read
    # higher than the last, and tripling the last then still looked flat): its verdict turns
    changed = copy.deepcopy(doc)
    ours = sorted((r for r in changed["runs"] if r["kind"] == "containers" and r["layout"] == "densekv"),
                  key=lambda r: r["n"])
    first, last = ours[0]["ops"]["read"], ours[-1]["ops"]["read"]
    assert ours[-1]["n"] == CURVE_N
    last["app_cpu_us"] = 3 * first["app_cpu_us"]
    last["store_cpu_us"] = 3 * first["store_cpu_us"]
    dk = next(v for v in verdicts(changed) if v.seed == "003" and "densekv" in v.claim)
    assert dk.measured.startswith("falls") and dk.word == "differs"


def test_the_terminal_table_and_the_summary_show_the_same_points(curve_run: Any) -> None:
    import re

    from densekv.tools.lab.runner import table_row
    from densekv.tools.lab.summary import headline

    lines = [ln for ln in headline(curve_run.doc) if ln.startswith("containers: ")]
    rows = [table_row(r) for o in curve_run.outputs for r in o.records if r.kind == "containers"]
    assert len(lines) == 3
    for line in lines:
        label = next(row[2] for row in rows if line.startswith(f"containers: {row[2]} "))
        m = re.search(r"N ([\d,/ ]+) - read req/s ([\d,/ ]+), CPU µs per read ([\d.,/ ]+)$", line)
        assert m, line
        ns, rps, cpu = ([float(x.replace(",", "")) for x in g.split(" / ")] for g in m.groups())
        mine = sorted((row for row in rows if row[2] == label), key=lambda row: int(row[4].replace(",", "")))
        assert ns == [float(row[4].replace(",", "")) for row in mine]
        assert rps == [float(row[6].replace(",", "")) for row in mine]
        assert cpu == [float(row[7].replace(",", "")) for row in mine]


def test_the_report_draws_the_cpu_curves_with_the_verdicts(curve_run: Any) -> None:
    html = curve_run.paths["report"].read_text()
    assert "CPU per request against stored sessions" in html and "Seed 003 claims that SQLite, no index" in html
    assert any(name.endswith("-cpu.png") for name in curve_run.paths)


def test_bulk_loaded_json_is_flask_sessions_own_encoding() -> None:
    import msgspec

    from densekv.tools.lab.containers.backends import Payloads

    for profile in ("P0", "P1", "P2", "P3"):
        got = Payloads(profile).get(0, 50)
        from densekv.tools.lab.session_profiles import sessions

        assert [text.encode() for _, text in got] == [msgspec.json.encode(d) for _, d in sessions(profile, 50)]


def test_the_verdict_rule_reads_cpu_per_request_and_falls_back_to_req_s() -> None:
    from densekv.tools.lab.containers.findings import Point, Trend

    def trend(*points: tuple[int, float, float]) -> Trend:
        return Trend("files-flat", "files, flat dir", tuple(Point(*p) for p in points))

    assert trend((0, 900, 400), (100, 2000, 410), (100_000, 50, 900)).verdict == "falls"  # CPU x2.25, req/s noise
    assert trend((0, 900, 400), (100_000, 300, 480)).verdict == "flat"  # req/s fell 3x on a busy machine, CPU did not
    assert trend((0, 900, 0), (100_000, 300, 0)).verdict == "falls"  # no CPU readings: req/s decides
    t = trend((0, 900, 400), (100_000, 900, 400))
    assert t.verdict == "flat" and t.seed == "falls" and not t.agrees


def test_a_run_directory_left_by_a_killed_lab_is_removed_and_a_live_one_kept(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from densekv.tools.lab.experiments.containers import OWNER, RUN_PREFIX, remove_stale

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()  # a pid that has just exited
    for name, pid in (("dead", dead), ("live", str(os.getpid()))):
        (tmp_path / (RUN_PREFIX + name)).mkdir()
        (tmp_path / (RUN_PREFIX + name) / OWNER).write_text(pid)
    (tmp_path / (RUN_PREFIX + "unowned")).mkdir()
    assert remove_stale(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [RUN_PREFIX + "live", RUN_PREFIX + "unowned"]
