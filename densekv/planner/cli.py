"""`densekv plan`: the planner from the shell.

A click command the main CLI registers (`cli.add_command(plan)` in densekv/cli.py, whose
main() turns errors into one line and exit 2); `python -m densekv.planner` runs it alone
through `main()` below, which does the same.
"""

from __future__ import annotations

import json

import click

from densekv.cli_params import COUNT, REDIS_URL


@click.command("plan")
@click.option("--kind", type=click.Choice(["sessions", "set", "map"]), required=True,
              help="what to store: sessions (tokens), set (fixed-size IDs), map (key -> value)")
@click.option("--items", type=COUNT, required=True, help="how many items (sessions, IDs, keys) to plan for")
@click.option("--payload", type=click.IntRange(0, 64 * 1024 * 1024), default=0, show_default=True,
              help="sessions: bytes of session data (msgpack); set: item size (0 = 16-byte IDs); "
                   "map: bytes per value (0 = 31-bit integers)")
@click.option("--ttl", is_flag=True,
              help="sessions: a rolling idle expiry besides the absolute one; map: a TTL per item")
@click.option("--url", envvar="DENSEKV_URL", default=None, type=REDIS_URL,
              help="redis:// URL of the server to plan for (the planner measures only in its database if "
                   "that is empty, else on an embedded Valkey with the same listpack settings)")
@click.option("--server", "server_name", default=None,
              help="a server of the matrix to plan for (default: the embedded valkey-9.1)")
@click.option("--layout", "layouts", multiple=True, help="consider only this layout (repeatable)")
@click.option("--json", "as_json", is_flag=True, help="print the recommendation as JSON")
@click.option("--verify", is_flag=True,
              help="load the plan (all of it up to 1M items, else 1M items' worth of partitions) on a "
                   "server like the target and print predicted vs measured")
@click.option("--refresh", is_flag=True, help="measure again even if the calibration cache has this server")
@click.option("--masters", type=click.IntRange(1, 16384), default=None,
              help="spread the plan over this many cluster masters (slots split evenly): partitions and "
                   "bytes per master, and the imbalance (a redis+cluster:// --url uses its own slots)")
def plan(kind: str, items: int, payload: int, ttl: bool, url: str | None, server_name: str | None,
         layouts: tuple[str, ...], as_json: bool, verify: bool, refresh: bool, masters: int | None) -> None:
    """Recommend a layout, partition count and config, with predicted bytes per item."""
    from densekv.planner.core import plan as make_plan
    from densekv.planner.errors import PlannerError

    if url and server_name:
        raise PlannerError("give --url or --server, not both")
    rec = make_plan(kind, items, payload, ttl, url=url, server=server_name, verify=verify,
                    layouts=layouts or None, refresh=refresh, masters=masters)
    if as_json:
        click.echo(json.dumps(rec.to_dict(), indent=2))
        return
    click.echo(f"layout      {rec.layout}")
    click.echo(f"partitions  {rec.partitions}")
    click.echo(f"config      {', '.join(f'{k} {v}' for k, v in rec.config.items()) or 'none needed'}")
    click.echo(f"predicted   {rec.predicted_bytes_per_item:.2f} B/item, "
               f"{rec.predicted_total_bytes / 2**20:,.1f} MiB for {rec.items:,} items")
    click.echo(f"use         {rec.usage}")
    click.echo(f"why         {rec.reason}")
    for advice in rec.config_advice:
        config = ", ".join(f"{k} {v}" for k, v in advice["config"].items())
        extra = f" ({advice['saving_pct']}% smaller)" if "saving_pct" in advice else ""
        click.echo(f"advice      {config}{extra}: {advice['why']}")
    if rec.cluster:
        c = rec.cluster
        click.echo(f"cluster     {c['masters']} masters ({c['slot_source']}): imbalance {c['imbalance']:.3f} "
                   "(fullest master / mean)")
        rows = list(zip(c["partitions_per_master"], c["bytes_per_master"]))
        for i, (n, b) in enumerate(rows[:16]):
            click.echo(f"  master {i:<3} {n:>8} partitions  {b / 2**20:>10,.1f} MiB")
        if len(rows) > 16:
            click.echo(f"  ... {len(rows) - 16} more masters (--json lists all)")
        if c["advice"]:
            click.echo(f"advice      {c['advice']}")
    for note in rec.notes:
        click.echo(f"note        {note}")
    if rec.verify:
        v = rec.verify
        click.echo(f"verify      predicted {v['predicted_bytes_per_item']:.2f} B/item, measured "
                   f"{v['measured_bytes_per_item']:.2f} ({v['error_pct']:+.2f}%): {v['how']}, on {v['measured_on']}")


def main() -> None:
    """Run `plan` alone with densekv's error handling: one line and exit 2 for expected errors."""
    from densekv.cli import run_command

    run_command(plan)
