"""The `densekv` command as a user runs it: real processes, one-line errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from densekv.tools.server.process import ServerProcess, free_port


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "densekv.tools.cli", *args],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **(env or {})},
    )


def test_probe_json_on_the_embedded_server() -> None:
    out = run("probe", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["flavor"] == "valkey" and data["field_ttl_encoding"] == "hashtable"


def test_probe_with_url(server: ServerProcess, server_name: str) -> None:
    out = run("probe", "--url", server.url, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["version"] == server.binary.version


@pytest.mark.parametrize(
    "args,message",
    [
        (["probe", "--url", f"redis://127.0.0.1:{free_port()}"], "nothing answers"),
        (["probe", "--url", "http://example"], "not a redis:// URL"),
        (["probe", "--server", "redis-2.8"], "choose one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    out = run(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_missing_matrix_server_says_how_to_get_it(tmp_path: Path) -> None:
    out = run("probe", "--server", "redis-7.0", env={"DENSEKV_SERVERS": str(tmp_path)})
    assert out.returncode == 2 and "scripts/get-servers" in out.stderr


def test_port_in_use_is_exit_2(server: ServerProcess) -> None:
    out = run("server", "start", "--port", str(server.port), env={"XDG_RUNTIME_DIR": "/tmp/densekv-test-state"})
    assert out.returncode == 2 and "in use" in out.stderr


def test_server_start_status_stop(tmp_path: Path) -> None:
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    started = run("server", "start", env=env)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    try:
        assert run("server", "status", env=env).stdout.strip() == url
        assert json.loads(run("probe", "--url", url, "--json").stdout)["flavor"] == "valkey"
        again = run("server", "start", env=env)
        assert again.stdout.strip() == url and "already running" in again.stderr
        port = url.rsplit(":", 1)[1].split("/")[0]
        same = run("server", "start", "--server", "valkey-9.1", "--port", port, env=env)
        assert same.returncode == 0 and same.stdout.strip() == url  # the same request: its answer
    finally:
        stopped = run("server", "stop", env=env)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert run("probe", "--url", url).returncode == 2


def test_servers_lists_the_matrix() -> None:
    out = run("servers", "--json")
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["valkey-9.1"]["present"] is True
    # the matrix always, the newer trixie servers only where get-servers fetched them
    assert {"redis-7.0", "redis-7.4", "valkey-8.0", "valkey-9.1"} <= set(rows)
    assert set(rows) <= {"redis-7.0", "redis-7.4", "redis-8.0", "valkey-8.0", "valkey-8.1", "valkey-9.1"}
    assert all(rows[n]["present"] for n in set(rows) & {"redis-8.0", "valkey-8.1"})


def test_sweep_command_removes_expired_sessions(server: ServerProcess) -> None:
    from densekv.sessions import SessionStore

    client = server.client()
    client.flushall()
    store = SessionStore(client, layout="dense", ttl=1, expected_sessions=1000)
    store.create_many(range(300))
    keep = SessionStore(client, layout="dense", ttl=3600, expected_sessions=1000).create(1)
    import time

    time.sleep(2.1)
    out = run("sweep", "--url", server.url, "--layout", "dense", "--expected-sessions", "1000")
    assert out.returncode == 0, out.stderr
    assert "swept 300 expired sessions" in out.stdout
    assert store.get(keep) is not None and store.count() == 1


def test_sweep_and_repartition_open_the_store_with_the_namespaces_lifecycle_options(server: ServerProcess) -> None:
    """A namespace that records a limit and an event stream (issue 34): the commands' stores
    open with them (with the defaults they would be refused: LifecycleMismatch), and the
    sweep announces what it removes in the app's stream."""
    import time

    from densekv.sessions import SessionStore
    from densekv.sessions.events import event_from_stream, stream_key

    client = server.client()
    client.flushall()
    ns = "clilife"
    store = SessionStore(client, ns, layout="dense", ttl=1, partitions=16, max_sessions_per_identity=5,
                         events_stream=1000)
    store.create_many(range(20))
    time.sleep(2.1)
    out = run("sweep", "--url", server.url, "--namespace", ns, "--layout", "dense")
    assert out.returncode == 0, out.stderr
    assert "swept 20 expired sessions" in out.stdout
    kinds = [event_from_stream(f).kind for _, f in client.xrange(stream_key(ns))]
    assert kinds.count("created") == 20 and kinds.count("expired") == 20
    out = run("repartition", "--url", server.url, "--namespace", ns, "--partitions", "32", "--json")
    assert out.returncode == 0, out.stderr
    assert client.hget(f"{ns}:meta", "life") == b"devices=0 limit=5 on_limit=evict stream=1000"


def test_sweep_and_repartition_open_a_namespace_made_without_the_identity_index(server: ServerProcess) -> None:
    """A namespace whose stores keep no identity index: the commands' stores open it that
    way (with the default, index_identities=True, they were refused: exit 2, nothing done)."""
    import time

    from densekv.sessions import SessionStore

    client = server.client()
    client.flushall()
    ns = "clinoix"
    store = SessionStore(client, ns, layout="dense", ttl=1, partitions=16, index_identities=False)
    store.create_many(range(30))
    keep = SessionStore(client, ns, layout="dense", ttl=3600, partitions=16, index_identities=False).create(7)
    time.sleep(2.1)
    out = run("sweep", "--url", server.url, "--namespace", ns, "--layout", "dense")
    assert out.returncode == 0, out.stderr
    assert "swept 30 expired sessions" in out.stdout
    out = run("repartition", "--url", server.url, "--namespace", ns, "--partitions", "32", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["partitions"] == 32
    assert client.hget(f"{ns}:meta", "index") == b"0"
    after = SessionStore(client, ns, layout="dense", ttl=3600, index_identities=False)
    got = after.get(keep)
    assert got is not None and got.identity == 7 and after.count() == 1


def test_train_command_gives_a_store_of_changed_sessions_a_dictionary_that_fits_them(server: ServerProcess) -> None:
    """Django logins stored, then a key the dictionary never saw written into each (most
    split over two values: the key table names it in each payload): `densekv train` trains
    again on the stored sessions; at their next write they are back in one value, every
    session intact. A store without a dictionary (the json layout) is refused cleanly."""
    from densekv.sessions import SessionStore
    from densekv.tools.lab.session_profiles import session

    client = server.client()
    client.flushall()
    ns = "clitrain"
    store = SessionStore(client, ns, layout="dense", partitions=16, ttl=3600, auto_train=None)
    store.train_dictionary([session("P1", i)[1] for i in range(300)])
    tokens = store.create_each([session("P1", i) for i in range(300)], batch=100)
    schemes = ("dark", "light", "auto")
    for i, token in enumerate(tokens):
        store.apply(token, {"preferred_color_scheme": schemes[i % 3]})
    split = store.stats()["split_sessions"]
    assert split > 150
    out = run("train", "--url", server.url, "--namespace", ns, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["previous"] != result["dictionary"] and result["split_sessions"] == split
    # the app's next writes, by a process that opens the store now (one already running
    # adopts the new dictionary at its next metadata read, within a minute)
    app = SessionStore(client, ns, layout="dense", partitions=16, ttl=3600)
    for i, token in enumerate(tokens):
        app.apply(token, {"preferred_color_scheme": schemes[(i + 1) % 3]})
    assert app.stats()["split_sessions"] < split // 10
    for i in (0, 150, 299):  # read by the store of before too: each payload names its dictionary
        assert store.get(tokens[i]).data == {**session("P1", i)[1], "preferred_color_scheme": schemes[(i + 1) % 3]}  # type: ignore[union-attr]
    SessionStore(client, "clijson", layout="json").create(1, {"a": 1})
    out = run("train", "--url", server.url, "--namespace", "clijson")
    assert out.returncode != 0 and "Traceback" not in out.stderr and "dictionary" in out.stderr


def test_repartition_command_grows_a_store_and_refuses_a_missing_one(server: ServerProcess) -> None:
    from densekv.sessions import SessionStore

    client = server.client()
    client.flushall()
    store = SessionStore(client, layout="dense", partitions=16)
    tokens = store.create_many(range(500))
    out = run("repartition", "--url", server.url, "--partitions", "64", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"partitions": 64, "moved": 500, "from": 16}
    assert all(store.get(t) is not None for t in tokens)  # the old store object follows
    assert store.explain()["partitions"] == 64
    missing = run("repartition", "--url", server.url, "--namespace", "nope", "--partitions", "64")
    assert missing.returncode != 0 and "no session store in namespace 'nope'" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = run("repartition", "--url", server.url, "--partitions", "100")
    assert bad.returncode == 2 and "power of two" in bad.stderr


def test_a_wrong_password_is_named_and_never_echoed(fresh_server: Any, server_name: str) -> None:
    import densekv
    from densekv.errors import ServerUnavailable

    proc = fresh_server(server_name, options={"requirepass": "right-one"})
    for url, says in ((f"redis://:wrong-secret@127.0.0.1:{proc.port}/0", "refused the credentials"),
                      (f"redis://default:wrong-secret@127.0.0.1:{proc.port}/0", "refused the credentials"),
                      (f"redis://127.0.0.1:{proc.port}/0", "needs a password and the URL gives none"),
                      (f"redis+cluster://127.0.0.1:{proc.port}/0", "needs a password and the URL gives none")):
        with pytest.raises(ServerUnavailable, match=says) as caught:
            densekv.connect(url)
        assert "wrong-secret" not in str(caught.value) and "right-one" not in str(caught.value)
    densekv.connect(f"redis://:right-one@127.0.0.1:{proc.port}/0").close()
    assert proc.client().ping()  # what densekv starts, it can talk to


def test_an_embedded_server_with_a_password_starts_and_answers() -> None:
    import densekv

    with densekv.embedded(options={"requirepass": "s3cret"}) as srv:
        assert srv.client().ping()
        assert densekv.connect(srv.url).ping()


# --- issue 23: CLI surprises, one test per case ---------------------------------------------


def _one_line_exit_2(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("densekv: "), out.stderr
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr
    return lines[0]


def test_probe_of_a_server_that_is_not_a_cluster_says_so(server: ServerProcess, server_name: str) -> None:
    """Was: `internal error RedisClusterException ... please report it`, exit 1."""
    if server_name not in ("valkey-9.1", "redis-7.0"):
        pytest.skip("one Valkey and one Redis say it the same way")
    plain = server.url.replace("redis://", "redis+cluster://", 1)
    line = _one_line_exit_2(run("probe", "--url", plain))
    assert "is not a cluster" in line and "redis://" in line


@pytest.mark.parametrize("which", ["--server", "--port", "--aof"])
def test_server_start_never_answers_another_request(which: str, tmp_path: Path) -> None:
    """Was: `server start --server redis-7.0` (or --port 80) while a valkey ran printed the
    valkey's URL and exited 0."""
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    started = run("server", "start", env=env)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    try:
        other = {"--server": ["--server", "redis-7.0"], "--port": ["--port", "80"], "--aof": ["--aof"]}[which]
        out = run("server", "start", *other, env=env)
        line = _one_line_exit_2(out)
        assert out.stdout == "" and url not in line  # no URL that is not what was asked for
        assert "densekv server stop" in line and " ".join(other) in line
        assert run("server", "status", env=env).stdout.strip() == url  # the running one untouched
    finally:
        run("server", "stop", env=env)


def test_server_status_exits_3_when_nothing_runs(tmp_path: Path) -> None:
    """Was: exit 0 with "no densekv server is running"."""
    out = run("server", "status", env={"XDG_RUNTIME_DIR": str(tmp_path)})
    assert out.returncode == 3 and out.stdout == ""
    assert "no densekv server is running" in out.stderr


def test_help_lists_every_accepted_value_and_no_option_that_is_not_there() -> None:
    """Was: `server start --help` mentioned a --url it lacks; `lab --help` left out containers."""
    from densekv.tools.lab.experiments import MODULES
    from densekv.tools.server.binaries import MATRIX

    start = run("server", "start", "--help").stdout
    assert "--url" not in start
    assert all(name in start for name in MATRIX)
    lab = " ".join(run("lab", "--help").stdout.split())
    assert ",".join(MODULES) in lab and "containers" in lab
    assert all(name in lab for name in MATRIX)
    for command in (["probe"], ["sweep"], ["plan"]):
        text = " ".join(run(*command, "--help").stdout.split())
        assert all(name in text for name in MATRIX), command


def test_analyze_refuses_an_unwritable_html_dir_before_reading_a_key(client: Any, server: ServerProcess,
                                                                      server_name: str, tmp_path: Path) -> None:
    """Was: the whole analysis ran, then `internal error FileNotFoundError`."""
    if server_name != "valkey-9.1":
        pytest.skip("checked before any server is read: one server is enough")
    client.mset({f"user:{i}": i for i in range(100)})
    client.config_resetstat()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for html in ("/proc/densekv-report", str(blocker), str(blocker / "sub")):
        line = _one_line_exit_2(run("analyze", "--url", server.url, "--html", html, "--no-replay"))
        assert "--html" in line and ("directory" in line or "is a file" in line)
    assert "cmdstat_scan" not in client.info("commandstats")  # refused before the scan began
    assert not list(tmp_path.glob(".densekv-check-*"))


def test_lab_refuses_an_unwritable_out_dir_and_unknown_experiments_at_once(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for args, says in ((["--out", "/proc/densekv-lab"], "--out"), (["--out", str(blocker)], "--out"),
                       (["--only", "containerz"], "containers")):
        line = _one_line_exit_2(run("lab", "--url", "redis://127.0.0.1:1/15", *args))
        assert says in line


def test_a_lab_refusal_that_shows_a_hidden_password_says_so(fresh_server: Any) -> None:
    """Was: the lab printed `redis://:***@...` as a URL to use, with no word that *** is
    not the password."""
    proc = fresh_server("valkey-9.1", options={"requirepass": "right-one"})
    with proc.client() as c:
        c.set("somebody:else", "data")  # db 0 is in use: the lab refuses it
    out = run("lab", "--url", f"redis://:right-one@127.0.0.1:{proc.port}/0", "--only", "maps", "--n", "100")
    line = _one_line_exit_2(out)
    assert "right-one" not in out.stdout + out.stderr
    assert "empty database" in line
    if ":***@" in line:  # the lab's hint shows a URL with the password hidden: it says so
        assert "*** stands for the password" in line
    with proc.client() as c:
        assert c.get("somebody:else") == b"data"


def test_the_lab_records_a_command_that_runs_as_printed() -> None:
    from densekv.tools.lab.cli import _command_line

    hidden = _command_line(["lab", "--url", "redis://:s3cret@db.example:6380/15", "--only", "maps"])
    assert "s3cret" not in hidden and '--url "$DENSEKV_URL"' in hidden
    runnable, _, comment = hidden.partition("  # ")
    assert ":***@" not in runnable and "redis://:***@db.example:6380/15" in comment
    assert _command_line(["--url=redis://db.example:6380/15", "--n", "100"]) == (
        "densekv lab --url redis://db.example:6380/15 --n 100")


def test_the_analyzer_names_the_producer_once_and_its_imports() -> None:
    """Was: `sessions: sessions: Flask-Session` and a command using FlaskSessionFallback
    without saying where it comes from."""
    from densekv.tools.analyze.patterns import Rules
    from densekv.tools.analyze.recommend import Choice, choose, command_for
    from densekv.tools.analyze.table import PatternStats

    pattern = Rules().pattern(b"session:Zm9vYmFyYmF6cXV4cXV1eHh5enp6enp6enp6enp6enp6eno")
    stats = PatternStats(pattern.name, pattern.glob, pattern.tokens)
    stats.keys, stats.types, stats.ttl = 48, {"string": 48}, {"none": 48}
    stats.shapes = {"msgpack-dict": 48}
    stats.sessions = {"flask-session": 48}
    stats.shape_samples, stats.lengths = 48, 48 * 90
    choice = choose(stats)
    assert choice.kind == "sessions" and not choice.reason.startswith("sessions")
    assert "Flask-Session" in choice.reason
    command = command_for(choice, stats, 600, "redis://h:1/0")
    assert "from densekv.integrations.flask import FlaskSessionFallback, SessionInterface" in command
    compile(command, "<the printed command>", "exec")  # Python as printed
    exec(command.split("; app.")[0], {})  # noqa: S102  # its imports run (our own text)
    for fmt in ("django", "starsessions"):
        other = command_for(Choice("sessions", "x", {"format": fmt}), stats, 600, "redis://h:1/0")
        compile(other, fmt, "exec")
        assert "os.environ['DENSEKV_URL']" in other


def test_a_printed_migrate_command_never_holds_a_hidden_password() -> None:
    from densekv.tools.analyze.patterns import Rules
    from densekv.tools.analyze.recommend import Choice, command_for
    from densekv.tools.analyze.table import PatternStats

    pattern = Rules().pattern(b"user:1")
    stats = PatternStats(pattern.name, pattern.glob, pattern.tokens)
    command = command_for(Choice("map", "counters"), stats, 10, "redis://:***@h:1/0")
    runnable, _, comment = command.partition("  # ")
    assert '--url "$DENSEKV_URL"' in runnable and ":***@" not in runnable
    assert "DENSEKV_URL" in comment


# --- densekv plan: progress, figures beside their config, labelled advice -------------------


def _planner_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The calibration cache test_planner.py uses: a calibration made by either is reused."""
    return str(tmp_path_factory.getbasetemp() / "planner-cache")


def test_plan_reports_progress_from_its_first_second(client: Any, server_name: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: nothing printed for 50 s while it calibrated."""
    import time

    from densekv.tools.planner import plan

    if server_name != "valkey-9.1":
        pytest.skip("the progress is the same code on every server")
    monkeypatch.setenv("DENSEKV_CACHE_DIR", str(tmp_path))  # an empty cache: it calibrates
    calls: list[tuple[float, str, int, int]] = []
    started = time.monotonic()
    plan("set", 5_000, client=client, layouts=["dense-set"],
         progress=lambda what, done, total: calls.append((time.monotonic() - started, what, done, total)))
    assert calls and calls[0][0] < 1.0, calls[:3]
    loading = [c for c in calls if c[3] > 0]
    assert any(c[1] == "calibrating dense-set (1 of 1)" for c in loading)
    assert [c[2] for c in loading] == sorted(c[2] for c in loading)  # loaded only grows
    assert loading[-1][2] == loading[-1][3]  # everything it said it would load, it loaded
    assert len({c[2] for c in loading}) >= 4  # steps, not one jump at the end
    assert client.dbsize() == 0


def test_plan_prints_what_it_does_and_the_time_left(tmp_path: Path) -> None:
    """Off a terminal: a line per step with the time left (on one, a rich bar does it)."""
    from densekv.tools.planner.cli import time_left

    out = run("plan", "--kind", "set", "--items", "5000", "--layout", "dense-set",
              env={"DENSEKV_CACHE_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    progress = [line for line in out.stderr.splitlines() if line.startswith("densekv plan: ")]
    assert progress and all("calibrating dense-set" in line and "items" in line for line in progress)
    assert any(line.endswith(" s left") for line in progress), progress
    assert out.stdout.startswith("layout      dense-set")
    assert time_left(0, 100, 1.0) == "time left: estimating"
    assert time_left(25, 100, 10.0) == "~30 s left" and time_left(10, 100, 60.0) == "~9 min left"
    again = run("plan", "--kind", "set", "--items", "5000", "--layout", "dense-set", "--json",
                env={"DENSEKV_CACHE_DIR": str(tmp_path)})
    assert again.returncode == 0 and again.stderr == ""  # cached, and --json: nothing on stderr
    assert json.loads(again.stdout)["layout"] == "dense-set"


def test_advice_is_one_line_per_config_with_that_configs_own_figure() -> None:
    """Was: three unlabelled `advice hash-max-listpack-value 144` lines (44%, 35%, 17%)."""
    from densekv.tools.planner.core import optional_advice
    from densekv.tools.planner.kinds import Candidate

    raise_ = {"hash-max-listpack-value": "144"}
    best = Candidate("dense", 16, "poisson", {})
    scored = [(277.58e3, best), (300e3, Candidate("zset", 1, "poisson", {})),
              (155.57e3, Candidate("dense", 16, "poisson", {}, raise_, "stays inline")),
              (180e3, Candidate("zset", 1, "poisson", {}, raise_, "stays inline")),
              (230e3, Candidate("fieldttl", 16, "poisson", {}, raise_, "stays inline")),
              (270e3, Candidate("fieldttl", 16, "poisson", {}, {"other-setting": "1"}, "under 5%"))]
    advice = optional_advice(scored, best, 277.58e3, 1000)
    assert len(advice) == 1  # one config, one line: its smallest layout under it
    (one,) = advice
    assert one["config"] == raise_ and one["layout"] == "dense" and one["partitions"] == 16
    assert one["predicted_bytes_per_item"] == 155.57 and one["saving_pct"] == 44.0


def test_plan_figures_belong_to_the_config_printed_beside_them(
        client: Any, server_name: str, monkeypatch: pytest.MonkeyPatch,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Was: `config hash-max-listpack-value 144` beside the figure without it; the use line
    had index_identities=False without saying that turns off log out everywhere (and then,
    issue 32, turned it off by default)."""
    from densekv.tools.planner import plan
    from densekv.tools.planner.cli import lines

    if server_name != "valkey-9.1":
        pytest.skip("one server is enough: the rule reads the probed limit")
    monkeypatch.setenv("DENSEKV_CACHE_DIR", _planner_cache(tmp_path_factory))
    rec = plan("sessions", 5_000, payload=300, client=client, layouts=["dense"])
    plain = next(c for c in rec.candidates if not c["config"])
    raised = next(c for c in rec.candidates if c["config"])
    assert rec.config == {} and rec.predicted_bytes_per_item == plain["predicted_bytes_per_item"]
    (advice,) = [a for a in rec.config_advice if not a.get("required")]
    assert advice["config"] == raised["config"] and advice["layout"] == "dense"
    assert advice["predicted_bytes_per_item"] == raised["predicted_bytes_per_item"]
    text = lines(rec)
    assert "config      none needed: the server as it is" in text
    assert any(line.startswith(f"predicted   {plain['predicted_bytes_per_item']:.2f} B/item") for line in text)
    (line,) = [line for line in text if line.startswith("advice ")]
    value = raised["config"]["hash-max-listpack-value"]
    assert f"optional, set hash-max-listpack-value {value}: dense with " in line
    assert f"at {raised['predicted_bytes_per_item']:.2f} B/item instead of {rec.predicted_bytes_per_item:.2f}" in line
    assert f"({advice['saving_pct']}% smaller)" in line
    # issue 32: the use line keeps every feature on; the lighter one beside it says what it loses
    assert "index_identities" not in rec.usage
    on, off, devices, limit = [line for line in text if line.startswith("use ")]
    assert rec.usage in on and "every feature on" in on and "identity index, about 17 B per logged-in" in on
    assert f"{rec.predicted_bytes_per_item:.2f} B/item" in on and f"{rec.predicted_bytes_per_item:.2f} B/item" in off
    assert "index_identities=False)" in off and "loses: store.sessions_of() and store.destroy_all()" in off
    assert [u["call"] for u in rec.use][:2] == [rec.usage, off.split("  #")[0].split(None, 1)[1]]
    # issue 34: the opt-in features, each with its bytes on top and what it adds
    assert "track_devices=True)" in devices and "adds: \"your devices\"" in devices
    assert "max_sessions_per_identity=N)" in limit and "adds: a per-user session limit" in limit
    assert "identity index, about 17 B" in devices and "benchmarks/session_devices.py" in limit


def test_server_start_refuses_an_unwritable_state_dir_before_starting(tmp_path: Path) -> None:
    """A server nobody could find or stop again is never started."""
    out = run("server", "start", env={"XDG_RUNTIME_DIR": "/proc/densekv-state", "TMPDIR": str(tmp_path)})
    line = _one_line_exit_2(out)
    assert "XDG_RUNTIME_DIR" in line and out.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no server directory made
