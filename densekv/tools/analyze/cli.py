"""`densekv analyze`: the analyzer from the shell (registered by densekv/tools/cli.py).

Progress (a bar with an ETA; off a terminal, a line every 10 s while keys are counted by
name) goes to stderr; the report to stdout. Ctrl-C stops the scan
after the batch in flight: the partial report is printed (the resume file, if given, is
up to date) and the command exits 130; a second Ctrl-C stops at once. `--rdb FILE` (one or
more) analyzes dumps offline (offline.py) instead of `--url`: the two are refused together.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from densekv.tools.cli_params import COUNT, REDIS_URL, writable_dir, writable_file
from densekv.tools.server.binaries import MATRIX, NEWER

PLAIN_PROGRESS_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal


@contextmanager
def _first_ctrl_c() -> Iterator[list[bool]]:
    """A flag set by the first SIGINT (the second raises KeyboardInterrupt as usual)."""
    flag = [False]
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, frame: Any) -> None:
        if flag[0]:
            raise KeyboardInterrupt
        flag[0] = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _check_url(url: str) -> None:
    """One line before any work if the URL does not answer, refuses its credentials, or is a
    redis+cluster:// URL of a server that is not a cluster. Only commands of the analyzer's
    documented list (PING, INFO) are sent, on a plain connection to the node named."""
    from densekv.connect import redact
    from densekv.errors import ServerUnavailable
    from densekv.tools.cli_params import connect_required

    cluster = url.startswith("redis+cluster://")
    client = connect_required("redis://" + url[len("redis+cluster://"):] if cluster else url)
    try:
        if cluster and not int(client.info("cluster").get("cluster_enabled", 0)):
            raise ServerUnavailable(f"the server at {redact(url)} is not a cluster (cluster mode is off): "
                                    "give its URL as redis://... instead of redis+cluster://...")
    finally:
        client.close()


def _source(url: str | None, rdb: tuple[str, ...], db: int | None) -> str | None:
    """The live URL to analyze, or None for --rdb; one line when the two are mixed or
    neither is given. DENSEKV_URL in the environment is ignored with --rdb (nothing is
    sent to it); a --url on the command line is refused."""
    from click.core import ParameterSource

    if not rdb:
        if db is not None:
            raise click.UsageError("--db goes with --rdb: a live server's database is in its URL "
                                   "(redis://host:port/DB)")
        if not url:
            raise click.UsageError("give --url URL (a live server) or --rdb FILE (a dump, analyzed offline)")
        return url
    if url and click.get_current_context().get_parameter_source("url") != ParameterSource.ENVIRONMENT:
        raise click.UsageError("give --url or --rdb, not both: --rdb analyzes the dump offline and sends "
                               "nothing to any server")
    return None


@click.command("analyze")
@click.option("--url", envvar="DENSEKV_URL", default=None, type=REDIS_URL,
              help="redis:// URL of the server to analyze (a cluster: any node, or redis+cluster://)")
@click.option("--rdb", "rdb", multiple=True, type=click.Path(exists=True, dir_okay=False, readable=True),
              help="analyze this dump offline instead (repeat for a cluster's primaries): loaded into a "
                   "throwaway server of the matrix here; nothing is sent to any other server")
@click.option("--db", type=click.IntRange(0, 10_000), default=None,
              help="with --rdb: the database of the dump to analyze (default 0)")
@click.option("--sample", type=COUNT, default=10_000, show_default=True,
              help="keys looked at one by one (TYPE, MEMORY USAGE...), shared among the patterns")
@click.option("--names-limit", type=COUNT, default=50_000_000, show_default=True,
              help="count every key by name (SCAN only: exact key counts) on servers with at most this many "
                   "keys; past it, the counts are estimated from the first --sample keys SCAN returns")
@click.option("--full", is_flag=True, help="look at every key (exact counts) instead of a sample")
@click.option("--rate", type=click.FloatRange(0, min_open=True), default=None, help="at most this many commands per second on the server")
@click.option("--rules", type=click.Path(exists=True, dir_okay=False, readable=True), default=None,
              help="name or split patterns: JSON [{name, regex, glob}] or lines 'NAME = REGEX'")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object (schema: densekv/tools/analyze/report.py)")
@click.option("--html", "html_dir", type=click.Path(file_okay=False), default=None, callback=writable_dir,
              help="also write DIR/analyze.html (DIR is created if missing)")
@click.option("--resume", type=click.Path(dir_okay=False), default=None, callback=writable_file,
              help="save the scan's progress here after each batch, and go on from it when it exists")
@click.option("--replay-keys", type=COUNT, default=1000, show_default=True,
              help="keys per pattern copied to the scratch server to measure the saving")
@click.option("--no-replay", is_flag=True, help="only scan and group (no scratch server, no savings)")
@click.option("--scratch", type=click.Choice((*MATRIX, *NEWER)), default=None, help="the server of the matrix to replay on (default: one like yours)")
def analyze(url: str | None, rdb: tuple[str, ...], db: int | None, sample: int, names_limit: int, full: bool, rate: float | None, rules: str | None, as_json: bool,
            html_dir: str | None, resume: str | None, replay_keys: int, no_replay: bool, scratch: str | None) -> None:
    """Measure, per key pattern, what densekv would save on a live server (read-only) or in a dump (--rdb)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from densekv.tools.analyze import report
    from densekv.tools.analyze.run import Options
    from densekv.tools.analyze.run import analyze as run_analysis

    url = _source(url, rdb, db)
    if url:
        _check_url(url)
    options = Options(url=url or "", sample=None if full else sample, names_limit=names_limit, rate=rate,
                      rules=rules, resume=resume,
                      replay_keys=replay_keys, replay=not no_replay, scratch=scratch, rdb=rdb, db=db or 0)
    err = Console(stderr=True)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f} keys"),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=True,
                   disable=not err.is_terminal)
    task = bar.add_task("scanning", total=None)
    started = [False]

    import time

    last_line = [time.monotonic()]

    def progress(state: Any) -> None:
        if not err.is_terminal and state.counted and state.phase == "names" \
                and time.monotonic() - last_line[0] >= PLAIN_PROGRESS_EVERY:
            # no bar off a terminal: a plain line now and then while the names pass runs long
            last_line[0] = time.monotonic()
            click.echo(f"counting keys by name: {state.taken:,} of {state.goal:,}", err=True)
        if not started[0]:  # only once the server answered: an error stays one line
            bar.start()
            started[0] = True
        what = "counting keys by name" if state.phase == "names" and state.counted else "sampling"
        bar.update(task, completed=state.taken, total=max(state.goal, state.taken) or None,
                   description=what if state.mode == "sample" else "scanning")

    def note(text: str) -> None:
        bar.update(task, description=text)

    with _first_ctrl_c() as stopped:
        try:
            doc = run_analysis(options, progress, lambda: stopped[0], note)
        finally:
            if started[0]:
                bar.stop()
    for name, dbs in ((doc.get("rdb") or {}).get("other_dbs") or {}).items():
        held = ", ".join(f"db {n} ({k:,} key{'s' if k != 1 else ''})" for n, k in sorted(dbs.items()))
        click.echo(f"note: {name} also holds keys in {held}: --db N analyzes another", err=True)
    if as_json:
        click.echo(report.to_json(doc))
    else:
        report.print_terminal(doc)
    if html_dir:
        path = report.write_html(doc, Path(html_dir))
        click.echo(f"wrote {path}", err=True)
    if doc["interrupted"]:
        sys.exit(130)
