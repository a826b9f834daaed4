"""One error-mapping runner for every click command densekv ships: the whole `densekv`
command (densekv/tools/cli.py) and the subcommands run alone (`python -m densekv.tools.lab`,
`python -m densekv.tools.planner`). It lives below them all, so that they import it and
densekv/tools/cli.py assembles them without an import cycle (tests/unit/test_import_cycles.py).
Every expected failure is one line on stderr and exit 2; never a traceback."""

from __future__ import annotations

import os
import sys

import click
import redis

from densekv.errors import DensekvError, ServerUnavailable

__all__ = ["run_command"]


def run_command(command: click.Command) -> None:
    """Run a click command (the whole CLI, or one alone as `python -m densekv.tools.lab` does),
    turning densekv and connection errors into one line and an exit code."""
    try:
        command.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:  # bad options or arguments: one line, like the rest
        message = " ".join(exc.format_message().split())  # click lists choices over several lines
        ctx = getattr(exc, "ctx", None)
        clicks_own = isinstance(exc, (click.NoSuchOption, click.MissingParameter, click.BadOptionUsage)) or any(
            s in message for s in ("unexpected extra argument", "is not a valid", "is not one of", "No such command"))
        if clicks_own and ctx is not None:  # click says what is wrong; --help says what is right
            message = f"{message.rstrip('.')} (see {ctx.command_path} --help)"
        click.echo(f"densekv: {message}", err=True)
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
    except redis.exceptions.RedisClusterException as exc:  # not a RedisError in redis-py
        click.echo(f"densekv: the cluster did not answer as a cluster: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug of ours: one line, the traceback on request
        if isinstance(exc, OSError) and exc.filename:  # a path we were given (a check missed it)
            click.echo(f"densekv: cannot use {exc.filename}: {exc.strerror or exc}: choose another path", err=True)
            sys.exit(2)
        if os.environ.get("DENSEKV_DEBUG"):
            raise
        click.echo(
            f"densekv: internal error {type(exc).__name__}: {exc} "
            "(set DENSEKV_DEBUG=1 for the traceback and please report it)",
            err=True,
        )
        sys.exit(1)

