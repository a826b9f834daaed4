"""`densekv migrate`: move plain string keys into a compact map (or back), online.

A click command the lead registers in densekv/cli.py (`main.add_command(migrate)`).
SCAN-based batches; resumable: rerun the same command after a crash and it finishes.
"""

from __future__ import annotations

import json
import sys

import click

from densekv.errors import DensekvError


@click.command("migrate")
@click.option("--url", envvar="DENSEKV_URL", required=True, help="redis://host:port of the server holding the keys")
@click.option("--namespace", required=True, help="the compact map's namespace")
@click.option("--pattern", default=None, help="glob of the plain keys to move in (e.g. 'user:*')")
@click.option("--expected", type=int, default=100_000, show_default=True, help="items the map is sized for (first run only)")
@click.option("--codec", default="auto", show_default=True)
@click.option("--batch", type=int, default=500, show_default=True, help="keys per round trip")
@click.option("--pause", type=float, default=0.0, help="seconds to sleep between batches")
@click.option("--reverse", is_flag=True, help="move every map item back to a plain key")
@click.option("--verify", "verify_only", is_flag=True, help="only check: items decode, buckets listpacks, plain keys left")
def migrate(url: str, namespace: str, pattern: str | None, expected: int, codec: str, batch: int,
            pause: float, reverse: bool, verify_only: bool) -> None:
    """Move plain keys matching PATTERN into map NAMESPACE (or back with --reverse)."""
    from densekv.connect import connect
    from densekv.maps.compact import CompactMap

    try:
        client = connect(url)
        m = CompactMap(client, namespace, codec=codec, expected=expected)
        if verify_only:
            report = m.verify(pattern)
        elif reverse:
            report = {**m.migrate_to_plain(batch=batch, pause=pause), **m.verify(None)}
        else:
            if not pattern:
                raise click.UsageError("--pattern is needed to migrate keys in")
            moved = m.migrate_from(pattern, batch=batch, pause=pause,
                                   progress=lambda c: click.echo(json.dumps(c), err=True))
            report = {**moved, "verify": m.verify(pattern)}
    except DensekvError as exc:
        click.echo(f"densekv: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(json.dumps(report, indent=2))
