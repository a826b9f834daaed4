"""The `densekv` command.

Every command that needs a server uses a throwaway embedded one unless given
`--url redis://...` (or DENSEKV_URL). Every expected failure - a URL that does not
answer, a server too old, a missing binary, a port in use - prints one line saying what
to do and exits 2; nothing here prints a traceback for those.
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
import redis

from densekv.cli_params import COUNT, PORT, POWER_OF_TWO, REDIS_URL
from densekv.errors import DensekvError, ServerUnavailable
from densekv.server.binaries import (
    EMBEDDED,
    MATRIX,
    NEWER,
    find_servers,
    server_binary,
    servers_dir,
)
from densekv.server.process import ServerProcess, pid_alive
from densekv.sessions.meta import LAYOUTS

url_option = click.option(
    "--url", envvar="DENSEKV_URL", default=None, type=REDIS_URL, help="redis:// URL of the server to use "
    "(default: a throwaway embedded Valkey). redis+cluster:// for a cluster."
)
server_option = click.option(
    "--server", "server_name", default=EMBEDDED, show_default=True,
    help=f"which server of the matrix to start when no --url is given ({', '.join(MATRIX)})",
)


@contextlib.contextmanager
def target_client(url: str | None, server_name: str) -> Iterator[Any]:
    """A client for --url, or for a throwaway server of the matrix."""
    from densekv.connect import connect
    from densekv.server.embedded import embedded

    if url:
        client = connect(url)
        try:
            yield client
        finally:
            client.close()
    else:
        with embedded(server_name) as srv:
            client = srv.client()
            try:
                yield client
            finally:
                client.close()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="densekv")
def cli() -> None:
    """Store sessions, sets and key/values in Redis or Valkey in a fraction of the memory."""


# --- probe --------------------------------------------------------------------------


@cli.command()
@url_option
@server_option
@click.option("--json", "as_json", is_flag=True, help="print the capabilities as JSON")
def probe(url: str | None, server_name: str, as_json: bool) -> None:
    """What the server really supports: limits, field TTL and its encoding, modules."""
    from densekv.server.probe import probe as run_probe

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


@server.command("start")
@server_option
@click.option("--port", type=PORT, default=None, help="loopback port, 1-65535 (default: a free one)")
@click.option("--aof", is_flag=True, help="turn on AOF persistence (appendfsync always)")
def server_start(server_name: str, port: int | None, aof: bool) -> None:
    """Start a server in the background and print its URL."""
    state = _read_state()
    if state is not None:
        click.echo(state["url"])
        click.echo(f"(already running: pid {state['pid']}; densekv server stop to stop it)", err=True)
        return
    proc = ServerProcess(server_binary(server_name), port=port, aof=aof, detached=True).start()
    assert proc.proc is not None
    path = _state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "pid": proc.proc.pid, "url": proc.url, "dir": str(proc.dir), "server": server_name,
    }))
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


@server.command("status")
def server_status() -> None:
    """Print the URL of the background server, if one runs."""
    state = _read_state()
    click.echo(state["url"] if state else "no densekv server is running")


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
def sweep(url: str | None, server_name: str, namespace: str, layout: str, expected_sessions: int,
          partitions: int | None, max_items: int | None, every: float | None, repeat: int | None) -> None:
    """Remove expired sessions (and stale identity-index entries), once or periodically.

    Only a store the app made: a namespace without one is an error (exit 2) and nothing is
    written, so a mistyped --namespace or --url is never taken for "nothing expired"."""
    from densekv.sessions import SessionStore

    with target_client(url, server_name) as client:
        _require_store(client, namespace, url)
        store = SessionStore(client, namespace=namespace, layout=layout,
                             expected_sessions=expected_sessions, partitions=partitions)
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
def repartition(url: str | None, server_name: str, namespace: str, partitions: int, as_json: bool) -> None:
    """Grow a partitioned session store to more partitions, online.

    Apps keep running: each old partition moves in one atomic step, and processes still
    using the old count follow on their next operation. Safe to interrupt and rerun."""
    import json

    from rich.progress import Progress

    from densekv.sessions import SessionStore

    with target_client(url, server_name) as client:
        _require_store(client, namespace, url)
        store = SessionStore(client, namespace=namespace)
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


def _require_store(client: Any, namespace: str, url: str | None) -> None:
    """A UsageError (exit 2, nothing written) unless the namespace holds a session store:
    opening a SessionStore on an empty namespace would write its metadata."""
    from densekv.sessions.meta import meta_key

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


def _register_lab() -> None:
    from densekv.lab.cli import lab
    from densekv.maps.cli import migrate
    from densekv.planner.cli import plan as plan_command

    cli.add_command(lab)
    cli.add_command(migrate)
    cli.add_command(plan_command)


_register_lab()


# --- analyze ------------------------------------------------------------------------


def _register_analyze() -> None:
    """`densekv analyze` (densekv/analyze/cli.py): what densekv would save on a live server."""
    from densekv.analyze.cli import analyze

    cli.add_command(analyze)


_register_analyze()


def main() -> None:
    """Entry point: run the CLI, turning densekv and connection errors into one line."""
    run_command(cli)


def run_command(command: click.Command) -> None:
    """Run a click command (the whole CLI, or one alone as `python -m densekv.lab` does),
    turning densekv and connection errors into one line and an exit code."""
    try:
        command.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:  # bad options or arguments: one line, like the rest
        click.echo(f"densekv: {exc.format_message()}", err=True)
        sys.exit(2)
    except DensekvError as exc:
        click.echo(f"densekv: {exc}", err=True)
        sys.exit(exc.exit_code)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        click.echo(f"densekv: {ServerUnavailable(f'the server stopped answering: {exc}')}", err=True)
        sys.exit(2)
    except redis.RedisError as exc:
        click.echo(f"densekv: the server refused: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug of ours: one line, the traceback on request
        if os.environ.get("DENSEKV_DEBUG"):
            raise
        click.echo(
            f"densekv: internal error {type(exc).__name__}: {exc} "
            "(set DENSEKV_DEBUG=1 for the traceback and please report it)",
            err=True,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
