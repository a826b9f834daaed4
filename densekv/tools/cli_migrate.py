"""`densekv migrate`: move plain string keys into a compact map (or back), online.

A click command the lead registers in densekv/tools/cli.py (`main.add_command(migrate)`).
SCAN-based batches; resumable: rerun the same command after a crash and it finishes.
"""

from __future__ import annotations

import json
import sys

import click

from densekv.codec import COMPRESSION_BASE, SERIALIZERS
from densekv.errors import DensekvError
from densekv.tools.cli_params import COUNT, REDIS_URL, SECONDS, connect_required


def _namespace(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from densekv.maps.meta import check_namespace

    try:
        check_namespace(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return value


@click.command("migrate")
@click.option("--url", envvar="DENSEKV_URL", required=True, type=REDIS_URL, help="redis://host:port of the server holding the keys")
@click.option("--namespace", required=True, callback=_namespace,
              help="the compact map's namespace (letters, digits, '_', '-', '.')")
@click.option("--pattern", default=None, help="glob of the plain keys to move in (e.g. 'user:*')")
@click.option("--expected", type=COUNT, default=100_000, show_default=True, help="items the map is sized for (first run only)")
@click.option("--codec", type=click.Choice((*SERIALIZERS, *COMPRESSION_BASE)), default="auto", show_default=True,
              help="how new values are written (first run only)")
@click.option("--batch", type=click.IntRange(1, 100_000), default=500, show_default=True, help="keys per round trip")
@click.option("--pause", type=SECONDS, default=0.0, help="seconds to sleep between batches")
@click.option("--reverse", is_flag=True, help="move every map item back to a plain key")
@click.option("--verify", "verify_only", is_flag=True, help="only check: items decode, buckets listpacks, plain keys left")
def migrate(url: str, namespace: str, pattern: str | None, expected: int, codec: str, batch: int,
            pause: float, reverse: bool, verify_only: bool) -> None:
    """Move plain keys matching PATTERN into map NAMESPACE (or back with --reverse)."""
    from densekv.maps.compact import CompactMap

    if not (pattern or verify_only or reverse):
        raise click.UsageError("--pattern is needed to migrate keys in (or give --reverse or --verify)")
    try:
        client = connect_required(url)
        _check_map_key(client, namespace, must_exist=verify_only or reverse)
        m = CompactMap(client, namespace, codec=codec, expected=expected).open()
        if verify_only:
            report = m.verify(pattern)
        elif reverse:
            report = {**m.migrate_to_plain(batch=batch, pause=pause), **m.verify(None)}
        else:
            assert pattern is not None
            moved = m.migrate_from(pattern, batch=batch, pause=pause,
                                   progress=lambda c: click.echo(json.dumps(c), err=True))
            report = {**moved, "verify": m.verify(pattern)}
    except DensekvError as exc:
        click.echo(f"densekv: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(json.dumps(report, indent=2))


def _check_map_key(client: object, namespace: str, *, must_exist: bool) -> None:
    """A UsageError (exit 2, nothing written) when the map's meta key holds something else,
    or, for --reverse and --verify, when there is no map: opening one would create it."""
    from densekv.maps.meta import meta_key

    key = meta_key(namespace)
    kind = client.type(key)  # type: ignore[attr-defined]
    if kind == b"none" and must_exist:
        raise click.UsageError(f"no compact map in namespace {namespace!r} at this URL: check --namespace and --url")
    if kind not in (b"none", b"hash"):
        raise click.UsageError(f"{key.decode(errors='replace')} holds a {kind.decode()}, not a compact map's "
                               "metadata: choose another --namespace")
