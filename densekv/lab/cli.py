"""`densekv lab`: the seed experiments on your server, with a report.

A click command the main CLI registers (`cli.add_command(lab)` in densekv/cli.py, whose
main() turns errors into one line and exit 2); `python -m densekv.lab` runs it alone
through `main()` below, which does the same. Ctrl-C ends the lab with a partial report
(what was measured), the lab's keys removed, one line and exit 130 (`LabInterrupted`).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from densekv.cli_params import REDIS_URL
from densekv.lab.sizing import DEFAULT_N
from densekv.lab.target import LabError

#: The most items per experiment the lab takes (10x the largest run in the README); more
#: would run for days and fill the server before any report.
MAX_N = 100_000_000


class LabInterrupted(LabError):
    """Ctrl-C: the partial report is written (or could not be); one line, exit 130."""

    exit_code = 130


@click.command("lab")
@click.option("--url", envvar="DENSEKV_URL", default=None, type=REDIS_URL,
              help="redis:// URL of your server; the lab uses only the (empty) database it names")
@click.option("--server", "servers", multiple=True,
              help="a server of the matrix to start and measure (repeat, comma-separate, or 'all')")
@click.option("--n", type=click.IntRange(max=MAX_N), default=None,
              help=f"items per experiment (default {DEFAULT_N:,}, sized to finish in 3 minutes)")
@click.option("--only", default=None, help="comma-separated experiments: sessions,sets,small_sets,maps,matrix")
@click.option("--out", "out_dir", default="densekv-lab", show_default=True, type=click.Path(file_okay=False),
              help="directory for report.html, results.json and the PNGs")
@click.option("--json", "as_json", is_flag=True, help="print results.json to stdout (no live display)")
@click.option("--allow-config", is_flag=True,
              help="with --url: allow CONFIG SET on your server (restored after) for the raised-limit curves")
@click.option("--cluster", is_flag=True,
              help="measure on a cluster the lab starts: 3 masters + 3 replicas of --server (default: the "
                   "embedded valkey); figures per cluster, per master beside them")
def lab(url: str | None, servers: tuple[str, ...], n: int | None, only: str | None, out_dir: str,
        as_json: bool, allow_config: bool, cluster: bool) -> None:
    """Rerun the seed experiments here and write DIR/report.html and DIR/results.json."""
    from densekv.lab.runner import Display, LabConfig, LiveDisplay, run_lab

    kinds = tuple(k.strip() for k in only.split(",") if k.strip()) if only else None
    config = LabConfig(url=url, servers=servers, n=n, only=kinds, out=Path(out_dir),
                       allow_config=allow_config, cluster=cluster, command=_command_line())
    display = Display() if as_json else LiveDisplay()
    try:
        result = run_lab(config, display)
    except KeyboardInterrupt:  # before anything was measured, or while the report was written
        raise LabInterrupted("interrupted: no report written; the lab's keys were removed") from None
    if as_json:
        click.echo(json.dumps(result.doc, indent=2))
    if result.interrupted:
        records = len(result.doc["runs"])
        raise LabInterrupted(f"interrupted: partial report ({records} configurations measured) in "
                             f"{result.paths['report']}; the lab's keys were removed")
    if not as_json:
        from densekv.lab.cluster_target import cluster_lines
        from densekv.lab.summary import headline

        for line in headline(result.doc) + cluster_lines(result.doc):
            click.echo(line)
        click.echo(f"report: {result.paths['report']}  results: {result.paths['results']}  "
                   f"({result.seconds:.0f}s)")
    if result.failed:
        failed = ", ".join(f"{o.kind} on {o.server}" for o in result.failed)
        raise click.ClickException(f"some experiments failed ({failed}): see the report")


def _command_line() -> str:
    args = [a for a in sys.argv[1:]]
    redacted = []
    for a in args:
        redacted.append(_redact_arg(a))
    return "densekv lab " + " ".join(shlex.quote(a) for a in redacted[_skip(redacted):])


def _skip(args: list[str]) -> int:
    return 1 if args and args[0] == "lab" else 0


def _redact_arg(arg: str) -> str:
    from densekv.lab.target import redact

    if arg.startswith(("redis://", "rediss://")):
        return redact(arg)
    if arg.startswith("--url="):
        return "--url=" + redact(arg[len("--url="):])
    return arg


def main() -> None:
    """Run `lab` alone with densekv's error handling: one line and exit 2 for expected errors."""
    from densekv.cli import run_command

    run_command(lab)
