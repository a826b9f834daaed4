"""The `densekv` command.

Every command that needs a server uses a throwaway embedded one unless given
`--url redis://...` (or DENSEKV_URL). Every expected failure - a URL that does not
answer, a server too old, a missing binary, a port in use - prints one line saying what
to do and exits 2; nothing here prints a traceback for those. Paths, URLs (that they parse,
answer, take the credentials and are the kind of server named) are checked before any long
work. `densekv server status` exits 3 when no background server runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from densekv import __version__
from densekv.sessions.meta import LAYOUTS
from densekv.tools.cli_params import COUNT, PORT, POWER_OF_TWO, REDIS_URL, SERVER_NAME
from densekv.tools.cli_run import run_command
from densekv.tools.server.binaries import (
    EMBEDDED,
    MATRIX,
    NEWER,
    find_servers,
    server_binary,
    servers_dir,
)
from densekv.tools.server.process import ServerProcess, pid_alive

url_option = click.option(
    "--url", envvar="DENSEKV_URL", default=None, type=REDIS_URL, help="redis:// URL of the server to use "
    "(default: a throwaway embedded Valkey). redis+cluster:// for a cluster."
)
server_option = click.option(
    "--server", "server_name", default=None, type=SERVER_NAME,
    help=f"which server of the matrix to start when no --url is given (default: {EMBEDDED})",
)


@contextlib.contextmanager
def target_client(url: str | None, server_name: str | None, *, mine: bool = False) -> Iterator[Any]:
    """A client for --url, or for a throwaway server of the matrix. `mine`: the command
    works on the user's data (sweep, repartition), so a dead --url does not suggest the
    throwaway server instead."""
    from densekv.connect import connect
    from densekv.tools.cli_params import connect_required
    from densekv.tools.server.embedded import embedded

    if url and server_name:
        raise click.UsageError(f"give --url or --server, not both (--server {server_name} starts a "
                               "throwaway server; --url names yours)")
    if url:
        client = connect_required(url) if mine else connect(url)
        try:
            yield client
        finally:
            client.close()
    else:
        with embedded(server_name or EMBEDDED) as srv:
            client = srv.client()
            try:
                yield client
            finally:
                client.close()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, package_name="densekv")
def cli() -> None:
    """Store sessions, sets and key/values in Redis or Valkey in a fraction of the memory."""


# --- probe --------------------------------------------------------------------------


@cli.command()
@url_option
@server_option
@click.option("--json", "as_json", is_flag=True, help="print the capabilities as JSON")
def probe(url: str | None, server_name: str | None, as_json: bool) -> None:
    """What the server really supports: limits, field TTL and its encoding, modules."""
    from densekv.capabilities import probe as run_probe

    with target_client(url, server_name) as client:
        caps = run_probe(client)
    if as_json:
        click.echo(caps.to_json())
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{caps.flavor} {caps.version}", show_header=False)
    for key, value in caps.to_dict().items():
        if key != "warnings":
            table.add_row(key, "null" if value is None else str(value))
    console = Console()
    console.print(table)
    for warning in caps.warnings:
        console.print(f"[yellow]warning:[/] {warning}")


# --- servers ------------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True)
def servers(as_json: bool) -> None:
    """List the servers of the matrix present here (scripts/get-servers fetches them)."""
    found = find_servers()
    rows = [
        {
            "name": name,
            "present": name in found,
            "version": found[name].version if name in found else None,
            "allocator": found[name].allocator if name in found else None,
            "modules": list(found[name].modules) if name in found else [],
            "path": str(found[name].path) if name in found else None,
        }
        for name in (*MATRIX, *NEWER)
        if name in MATRIX or name in found
    ]
    hint = _servers_hint()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        if row["present"]:
            click.echo(f"{row['name']:<11} {row['version']:<8} {row['allocator']:<16} {row['path']}")
        else:
            click.echo(f"{row['name']:<11} missing  ({hint})")
    newer = [n for n in NEWER if n not in found]
    if newer and not as_json:
        click.echo(f"(also: {', '.join(newer)} from Debian trixie, with scripts/get-servers --all)")


def _servers_hint() -> str:
    """Where `densekv servers` looked, and how to get the servers there (never a made-up
    path: an installed densekv has no checkout, so no .servers beside its package)."""
    root = servers_dir()
    if os.environ.get("DENSEKV_SERVERS"):
        return f"not in DENSEKV_SERVERS={root}: run scripts/get-servers of a densekv checkout and point it there"
    if (root.parent / "scripts" / "get-servers").is_file():
        return f"not in {root}: run {root.parent / 'scripts' / 'get-servers'}"
    return ("not in ./.servers: run scripts/get-servers in a densekv checkout, then run densekv there "
            "or set DENSEKV_SERVERS to its .servers")


# --- server start|stop|status -------------------------------------------------------


def _state_file() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or str(Path.home() / ".cache")
    return Path(base) / "densekv" / "server.json"


def _read_state() -> dict[str, Any] | None:
    path = _state_file()
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not pid_alive(int(state["pid"])):
        path.unlink(missing_ok=True)
        shutil.rmtree(state.get("dir", ""), ignore_errors=True)
        return None
    return state


@cli.group()
def server() -> None:
    """Start or stop a background embedded server for use with --url."""


def _state_port(state: dict[str, Any]) -> int | None:
    from urllib.parse import urlsplit

    try:
        return urlsplit(str(state["url"])).port
    except ValueError:
        return None


def _check_state_dir() -> None:
    """The state file's directory must be writable before a server is started (else the
    server would run with nothing to find or stop it by)."""
    from densekv.tools.cli_params import can_create_in

    parent = _state_file().parent
    probe_dir = parent
    while not probe_dir.exists() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir() or not can_create_in(str(probe_dir)):
        raise click.UsageError(f"cannot write the server's state under {parent}: set XDG_RUNTIME_DIR to a "
                               "writable directory")


@server.command("start")
@click.option("--server", "server_name", default=None, type=SERVER_NAME,
              help=f"which server of the matrix to start (default: {EMBEDDED})")
@click.option("--port", type=PORT, default=None, help="loopback port, 1-65535 (default: a free one)")
@click.option("--aof", is_flag=True, help="turn on AOF persistence (appendfsync always)")
def server_start(server_name: str | None, port: int | None, aof: bool) -> None:
    """Start a server in the background and print its URL.

    One background server at a time: if one runs and it is what was asked for (the same
    server, port and persistence, or nothing said about them), its URL is printed again;
    if it is not, nothing is started and the command exits 2."""
    state = _read_state()
    if state is not None:
        running, running_port = state.get("server", EMBEDDED), _state_port(state)
        differs = []
        if server_name is not None and server_name != running:
            differs.append(f"--server {server_name}")
        if port is not None and port != running_port:
            differs.append(f"--port {port}")
        if aof and not state.get("aof", False):
            differs.append("--aof")
        if differs:
            raise click.UsageError(
                f"{running} already runs in the background on port {running_port} (pid {state['pid']}), "
                f"not what {' '.join(differs)} asks for: run densekv server stop first")
        click.echo(state["url"])
        click.echo(f"(already running: {running}, pid {state['pid']}; densekv server stop to stop it)", err=True)
        return
    _check_state_dir()
    name = server_name or EMBEDDED
    proc = ServerProcess(server_binary(name), port=port, aof=aof, detached=True).start()
    assert proc.proc is not None
    path = _state_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({
            "pid": proc.proc.pid, "url": proc.url, "dir": str(proc.dir), "server": name, "aof": aof,
        }))
    except BaseException:  # never a background server nothing can find or stop
        proc.stop()
        raise
    click.echo(proc.url)


@server.command("stop")
def server_stop() -> None:
    """Stop the background server started by `densekv server start`."""
    state = _read_state()
    if state is None:
        click.echo("no densekv server is running")
        return
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(state["dir"], ignore_errors=True)
    _state_file().unlink(missing_ok=True)
    click.echo(f"stopped {state['server']} at {state['url']}")


#: `densekv server status` when no server runs (as LSB init scripts' "program is not running")
NOT_RUNNING = 3


@server.command("status")
def server_status() -> None:
    """Print the URL of the background server; exit 3 if none runs."""
    state = _read_state()
    if state is None:
        click.echo("no densekv server is running (densekv server start starts one)", err=True)
        sys.exit(NOT_RUNNING)
    click.echo(state["url"])


@cli.command()
@url_option
@server_option
@click.option("--namespace", default="sess", show_default=True)
@click.option("--layout", type=click.Choice(("auto", *LAYOUTS)), default="auto", show_default=True,
              help="the store's layout (as the app made it; checked against the store's)")
@click.option("--expected-sessions", type=COUNT, default=100_000, show_default=True,
              help="ignored: the store's partition count is on the server (kept for old scripts)")
@click.option("--partitions", type=POWER_OF_TWO, default=None,
              help="the partition count, if the app set it (checked against the store's)")
@click.option("--max-items", type=COUNT, default=None, help="stop after removing this many (default: a full pass)")
@click.option("--every", type=click.FloatRange(0, 86_400, min_open=True), default=None,
              help="repeat every SECONDS until interrupted")
@click.option("--count", "repeat", type=COUNT, default=None, help="with --every: stop after this many passes")
def sweep(url: str | None, server_name: str | None, namespace: str, layout: str, expected_sessions: int,
          partitions: int | None, max_items: int | None, every: float | None, repeat: int | None) -> None:
    """Remove expired sessions (and stale identity-index entries), once or periodically.

    Only a store the app made: a namespace without one is an error (exit 2) and nothing is
    written, so a mistyped --namespace or --url is never taken for "nothing expired"."""
    from densekv.sessions import SessionStore

    with target_client(url, server_name, mine=True) as client:
        recorded = _require_store(client, namespace, url)
        store = SessionStore(client, namespace=namespace, layout=layout,
                             expected_sessions=expected_sessions, partitions=partitions, **recorded).open()
        passes = 0
        while True:
            started = time.monotonic()
            removed = store.sweep(max_items)
            passes += 1
            click.echo(f"swept {removed} expired sessions from {namespace} ({store.layout}) "
                       f"in {time.monotonic() - started:.2f}s")
            if every is None or (repeat is not None and passes >= repeat):
                return
            time.sleep(max(0.0, every - (time.monotonic() - started)))


@cli.command()
@url_option
@server_option
@click.option("--namespace", default="sess", show_default=True)
@click.option("--partitions", type=POWER_OF_TWO, required=True,
              help="the new partition count: a power of two, 2 to 256 times the current one")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def repartition(url: str | None, server_name: str | None, namespace: str, partitions: int, as_json: bool) -> None:
    """Grow a partitioned session store to more partitions, online.

    Apps keep running: each old partition moves in one atomic step, and processes still
    using the old count follow on their next operation. Safe to interrupt and rerun."""
    import json

    from rich.progress import Progress

    from densekv.sessions import SessionStore

    with target_client(url, server_name, mine=True) as client:
        store = SessionStore(client, namespace=namespace, **_require_store(client, namespace, url)).open()
        before = store.explain()["partitions"]
        with Progress(transient=True, disable=as_json) as bar:
            task = bar.add_task(f"splitting {namespace} partitions", total=None)
            result = store.repartition(partitions, lambda done, total: bar.update(task, completed=done, total=total))
        result["from"] = before
        if as_json:
            click.echo(json.dumps(result))
        else:
            click.echo(f"{namespace}: {before} -> {result['partitions']} partitions, "
                       f"{result['moved']} sessions moved")


@cli.command()
@url_option
@server_option
@click.option("--namespace", default="sess", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def train(url: str | None, server_name: str | None, namespace: str, as_json: bool) -> None:
    """Train a session store's dictionary again, on the sessions it holds.

    For a store whose sessions changed shape since its dictionary was trained (a new key in
    every session): new payloads are written with the new dictionary, every process adopts
    it within a minute, and each session moves to it at its next write (payloads written
    before keep decoding with their own). Nothing else is written. A running store also
    does this itself, some thousand writes after the change (docs/sessions.md, "Sessions
    that change shape"): this is for doing it now."""
    import json

    from densekv.sessions import SessionStore

    with target_client(url, server_name, mine=True) as client:
        store = SessionStore(client, namespace=namespace, **_require_store(client, namespace, url)).open()
        before = store.explain()["dictionary"]
        stats = store.stats()
        trained = store.train_dictionary()
        result = {"namespace": namespace, "dictionary": trained, "previous": before,
                  "sessions": stats.get("sessions"), "split_sessions": stats.get("split_sessions"),
                  "out_of_line_sessions": stats.get("out_of_line_sessions")}
        if as_json:
            click.echo(json.dumps(result))
        else:
            click.echo(f"{namespace}: dictionary {before} -> {trained}; of {result['sessions']} sessions, "
                       f"{result['split_sessions']} split and {result['out_of_line_sessions']} out of line "
                       "take the new dictionary at their next write")


def _require_store(client: Any, namespace: str, url: str | None) -> dict[str, Any]:
    """A UsageError (exit 2, nothing written) unless the namespace holds a session store:
    opening a SessionStore on an empty namespace would write its metadata. The lifecycle
    options and the identity-index setting the namespace records, as SessionStore keywords:
    the command's store opens with them (a sweep announces expiries to the event stream the
    app writes to; a namespace made with index_identities=False opens that way)."""
    from densekv.sessions.meta import Lifecycle, meta_key

    where = "this server" if url else "a throwaway embedded server (give --url of your server)"
    meta = meta_key(namespace)
    kind = client.type(meta)
    if kind == b"none":
        raise click.UsageError(
            f"no session store in namespace {namespace!r} on {where}: check --namespace and --url "
            "(the app's first SessionStore makes it)"
        )
    if kind != b"hash":
        raise click.UsageError(
            f"{meta.decode(errors='replace')} holds a {kind.decode()}, not a densekv session store's "
            "metadata: check --namespace and --url"
        )
    life, index = client.hmget(meta, "life", "index")
    options = Lifecycle.parse(life.decode(errors="replace")).keywords() if life is not None else {}
    if index is not None:  # the stores' identity index, kept or not: a store that disagrees is refused
        options["index_identities"] = index == b"1"
    return options


def _register_lab() -> None:
    from densekv.tools.cli_migrate import migrate
    from densekv.tools.lab.cli import lab
    from densekv.tools.planner.cli import plan as plan_command

    cli.add_command(lab)
    cli.add_command(migrate)
    cli.add_command(plan_command)


_register_lab()


# --- analyze ------------------------------------------------------------------------


def _register_analyze() -> None:
    """`densekv analyze` (densekv/tools/analyze/cli.py): what densekv would save on a live server."""
    from densekv.tools.analyze.cli import analyze

    cli.add_command(analyze)


_register_analyze()


def main() -> None:
    """Entry point: run the CLI, turning densekv and connection errors into one line."""
    run_command(cli)


if __name__ == "__main__":
    main()
