"""`densekv lab`: the seed experiments on your server, with a report.

A click command the main CLI registers (`cli.add_command(lab)` in densekv/tools/cli.py, run by
densekv/cli_run.run_command, which turns errors into one line and exit 2); `python -m
densekv.tools.lab` runs it alone through `main()` below, which does the same. Ctrl-C ends the
lab with a partial report (what was measured), the lab's keys removed, one line and exit 130
(`LabInterrupted`).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from densekv.connect import redact
from densekv.errors import LabError
from densekv.errors import LabInterrupted as _LabInterrupted
from densekv.tools.cli_params import REDIS_URL, writable_dir
from densekv.tools.lab.experiments import MODULES
from densekv.tools.lab.sizing import DEFAULT_N
from densekv.tools.server.binaries import MATRIX, NEWER

#: The most items per experiment the lab takes (10x the largest run in the README); more
#: would run for days and fill the server before any report.
MAX_N = 100_000_000


#: what a password-carrying URL becomes in a message or a recorded command
HIDDEN = ":***@"
PASSWORD_NOTE = " (*** stands for the password of your --url, which is never printed)"


def _only(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...] | None:
    """--only: known experiment names, checked before any server is started."""
    if value is None:
        return None
    kinds = tuple(k.strip() for k in value.split(",") if k.strip())
    unknown = [k for k in kinds if k not in MODULES]
    if unknown or not kinds:
        raise click.BadParameter(f"unknown experiment {(unknown or [value])[0]!r}: choose from "
                                 f"{','.join(MODULES)} (comma-separated)", ctx, param)
    return kinds


@click.command("lab")
@click.option("--url", envvar="DENSEKV_URL", default=None, type=REDIS_URL,
              help="redis:// URL of your server; the lab uses only the (empty) database it names")
@click.option("--server", "servers", multiple=True,
              help=f"a server of the matrix to start and measure: {', '.join((*MATRIX, *NEWER))} or all "
                   "(repeat, or comma-separate)")
@click.option("--n", type=click.IntRange(max=MAX_N), default=None,
              help=f"items per experiment (default {DEFAULT_N:,}, sized to finish in 3 minutes)")
@click.option("--only", default=None, callback=_only, metavar="KINDS",
              help=f"comma-separated experiments: {','.join(MODULES)} (default: all of them)")
@click.option("--out", "out_dir", default="densekv-lab", show_default=True, type=click.Path(file_okay=False),
              callback=writable_dir, help="directory for report.html, results.json and the PNGs")
@click.option("--json", "as_json", is_flag=True, help="print results.json to stdout (no live display)")
@click.option("--allow-config", is_flag=True,
              help="with --url: allow CONFIG SET on your server (restored after) for the raised-limit curves")
@click.option("--cluster", is_flag=True,
              help="measure on a cluster the lab starts: 3 masters + 3 replicas of --server (default: the "
                   "embedded valkey); figures per cluster, per master beside them")
def lab(url: str | None, servers: tuple[str, ...], n: int | None, only: tuple[str, ...] | None,
        out_dir: str, as_json: bool, allow_config: bool, cluster: bool) -> None:
    """Rerun the seed experiments here and write DIR/report.html and DIR/results.json."""
    from densekv.tools.lab.runner import Display, LabConfig, LiveDisplay, run_lab

    config = LabConfig(url=url, servers=servers, n=n, only=only, out=Path(out_dir),
                       allow_config=allow_config, cluster=cluster, command=_command_line())
    display = Display() if as_json else LiveDisplay()
    try:
        result = run_lab(config, display)
    except _LabInterrupted:
        raise
    except LabError as exc:  # a URL with its password hidden is not one to copy as it is
        if HIDDEN in str(exc) and PASSWORD_NOTE not in str(exc):
            raise type(exc)(f"{exc}{PASSWORD_NOTE}") from exc
        raise
    except KeyboardInterrupt:  # before anything was measured, or while the report was written
        raise _LabInterrupted("interrupted: no report written; the lab's keys were removed") from None
    if as_json:
        click.echo(json.dumps(result.doc, indent=2))
    if result.interrupted:
        records = len(result.doc["runs"])
        raise _LabInterrupted(f"interrupted: partial report ({records} configurations measured) in "
                             f"{result.paths['report']}; the lab's keys were removed")
    if not as_json:
        from densekv.tools.lab.cluster_target import cluster_lines
        from densekv.tools.lab.summary import headline

        for line in headline(result.doc) + cluster_lines(result.doc):
            click.echo(line)
        click.echo(f"report: {result.paths['report']}  results: {result.paths['results']}  "
                   f"({result.seconds:.0f}s)")
    if result.failed:
        failed = ", ".join(f"{o.kind} on {o.server}" for o in result.failed)
        raise click.ClickException(f"some experiments failed ({failed}): see the report")


def _command_line(argv: list[str] | None = None) -> str:
    """The command as run, for the report, one a user can copy and run again: a --url with
    a password is recorded as "$DENSEKV_URL" (the lab reads that variable too), never with
    the password and never as a redacted URL that would not connect."""
    args = list(sys.argv[1:] if argv is None else argv)
    args = args[_skip(args):]
    out: list[str] = []
    hidden: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--url" and i + 1 < len(args):
            value, i = args[i + 1], i + 2
        elif arg.startswith("--url="):
            value, i = arg[len("--url="):], i + 1
        else:
            out.append(shlex.quote(arg))
            i += 1
            continue
        if redact(value) != value:
            hidden = redact(value)
            out.append('--url "$DENSEKV_URL"')
        else:
            out.append(f"--url {shlex.quote(value)}")
    line = " ".join(["densekv lab", *out])
    if hidden is not None:
        line += f"  # DENSEKV_URL: {hidden} with its password"
    return line


def _skip(args: list[str]) -> int:
    return 1 if args and args[0] == "lab" else 0


def main() -> None:
    """Run `lab` alone with densekv's error handling: one line and exit 2 for expected errors."""
    from densekv.tools.cli_run import run_command

    run_command(lab)
