"""`densekv plan`: the planner from the shell.

A click command the main CLI registers (`cli.add_command(plan)` in densekv/tools/cli.py, run by
densekv/cli_run.run_command, which turns errors into one line and exit 2); `python -m
densekv.tools.planner` runs it alone through `main()` below, which does the same.
"""

from __future__ import annotations

import json
import sys
import time
from types import TracebackType
from typing import Any

import click

from densekv.tools.cli_params import COUNT, REDIS_URL, SERVER_NAME

#: the least time between two progress lines when stderr is not a terminal
LINE_EVERY = 2.0


def time_left(done: int, total: int, seconds: float) -> str:
    """'~N s left' from the pace so far ('time left: estimating' before any item is loaded)."""
    if done <= 0 or seconds <= 0:
        return "time left: estimating"
    left = (total - done) * seconds / done
    if left < 60:
        return f"~{max(1, round(left))} s left"
    return f"~{left / 60:.0f} min left"


class PlanProgress:
    """What `densekv plan` is doing, on stderr, from its first second: on a terminal a rich
    bar (what it does, items loaded, time left; erased at the end), elsewhere a line per
    step and at most one every LINE_EVERY seconds, only once it calibrates (so that an
    error before that stays the one line on stderr)."""

    def __init__(self, enabled: bool) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.enabled = enabled
        self.live = enabled and self.console.is_terminal
        self.started: float | None = None  # when the first item was to be loaded
        self.last_line = 0.0
        self.last_what = ""
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> PlanProgress:  # noqa: PYI034  # mypy targets 3.10: no typing.Self
        if self.live:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=16),
                                TextColumn("{task.fields[items]}"), TimeElapsedColumn(),
                                TextColumn("{task.fields[left]}"), console=self.console, transient=True)
            self.task = self.bar.add_task("starting", total=None, items="", left="")
            self.bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, what: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if total and self.started is None:
            self.started = now
        left = time_left(done, total, now - self.started) if self.started is not None else ""
        items = f"{done:,}/{total:,} items" if total else ""
        if self.bar is not None:
            self.bar.update(self.task, description=what, completed=done, total=total or None,
                            items=items, left=left)
            return
        if not total or (what == self.last_what and now - self.last_line < LINE_EVERY):
            return
        self.last_line, self.last_what = now, what
        print(f"densekv plan: {what}: {items}, {left}", file=sys.stderr, flush=True)


@click.command("plan")
@click.option("--kind", type=click.Choice(["sessions", "set", "map"]), required=True,
              help="what to store: sessions (tokens), set (fixed-size IDs), map (key -> value)")
@click.option("--items", type=COUNT, required=True, help="how many items (sessions, IDs, keys) to plan for")
@click.option("--payload", type=click.IntRange(0, 64 * 1024 * 1024), default=0, show_default=True,
              help="sessions: bytes of incompressible session data (random bytes in msgpack: an upper "
                   "bound; --sample prices real sessions); set: item size (0 = 16-byte IDs); "
                   "map: bytes per value (0 = 31-bit integers)")
@click.option("--sample", "sample", default=None, metavar="FILE",
              help="sessions: price these sessions (JSON lines: a session's data dict, or "
                   '{"identity": ..., "data": {...}}) as densekv frames them, with the zstd dictionary a '
                   "store trains on them; instead of --payload")
@click.option("--ttl", is_flag=True,
              help="sessions: a rolling idle expiry besides the absolute one; map: a TTL per item")
@click.option("--url", envvar="DENSEKV_URL", default=None, type=REDIS_URL,
              help="redis:// URL of the server to plan for (the planner measures only in its database if "
                   "that is empty, else on an embedded Valkey with the same listpack settings)")
@click.option("--server", "server_name", default=None, type=SERVER_NAME,
              help="a server of the matrix to plan for (default: the embedded valkey-9.1)")
@click.option("--layout", "layouts", multiple=True,
              help="consider only this layout (repeatable): sessions dense, fieldttl, zset; set dense-set, "
                   "dense-hash; map buckets")
@click.option("--json", "as_json", is_flag=True, help="print the recommendation as JSON (no progress shown)")
@click.option("--verify", is_flag=True,
              help="load the plan (all of it up to 1M items, else 1M items' worth of partitions) on a "
                   "server like the target and print predicted vs measured")
@click.option("--refresh", is_flag=True, help="measure again even if the calibration cache has this server")
@click.option("--masters", type=click.IntRange(1, 16384), default=None,
              help="spread the plan over this many cluster masters (slots split evenly): partitions and "
                   "bytes per master, and the imbalance (a redis+cluster:// --url uses its own slots)")
def plan(kind: str, items: int, payload: int, sample: str | None, ttl: bool, url: str | None,
         server_name: str | None, layouts: tuple[str, ...], as_json: bool, verify: bool, refresh: bool,
         masters: int | None) -> None:
    """Recommend a layout, partition count and config, with predicted bytes per item."""
    from densekv.errors import PlannerError
    from densekv.tools.planner.core import plan as make_plan

    if url and server_name:
        raise PlannerError("give --url or --server, not both")
    with PlanProgress(enabled=not as_json) as progress:
        rec = make_plan(kind, items, payload, ttl, sample=sample, url=url, server=server_name, verify=verify,
                        layouts=layouts or None, refresh=refresh, masters=masters, progress=progress)
    if as_json:
        click.echo(json.dumps(rec.to_dict(), indent=2))
        return
    for line in lines(rec):
        click.echo(line)


def _config(config: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in config.items())


def _use_lines(rec: Any) -> list[str]:
    """One `use` line per call (every feature on first), each with its bytes and what it loses."""
    out = []
    for use in rec.use or [{"call": rec.usage, "bytes_per_item": rec.predicted_bytes_per_item, "plus": None,
                            "loses": None}]:
        bytes_ = f"{use['bytes_per_item']:.2f} B/item" + (f" + {use['plus']}" if use["plus"] else "")
        what = f"loses: {use['loses']}" if use["loses"] else f"adds: {use['adds']}" if use.get("adds") \
            else "every feature on"
        out.append(f"use         {use['call']}  # {bytes_}; {what}")
    return out


def lines(rec: Any) -> list[str]:
    """The terminal report: the figure beside a configuration is the one with it."""
    needed = _config(rec.config)
    out = [
        f"layout      {rec.layout}",
        f"partitions  {rec.partitions}",
        f"config      {needed + ' (needed by this layout)' if needed else 'none needed: the server as it is'}",
        (f"predicted   {rec.predicted_bytes_per_item:.2f} B/item, {rec.predicted_total_bytes / 2**20:,.1f} MiB "
         f"for {rec.items:,} items ({'with ' + needed if needed else 'the server as it is'})"),
        *_use_lines(rec),
        *([f"payload     {rec.payloads['description']}"] if rec.payloads else []),
        f"why         {rec.reason}",
    ]
    for advice in rec.config_advice:
        if advice.get("required"):
            continue  # the config line above
        what = f"set {_config(advice['config'])}"
        figure = (f"{advice['layout']} with {advice['partitions']:,} partitions at "
                  f"{advice['predicted_bytes_per_item']:.2f} B/item instead of {rec.predicted_bytes_per_item:.2f} "
                  f"({advice['saving_pct']}% smaller)")
        out.append(f"advice      optional, {what}: {figure}; {advice['why']}")
    if rec.cluster:
        c = rec.cluster
        out.append(f"cluster     {c['masters']} masters ({c['slot_source']}): imbalance {c['imbalance']:.3f} "
                   "(fullest master / mean)")
        rows = list(zip(c["partitions_per_master"], c["bytes_per_master"]))
        for i, (n, b) in enumerate(rows[:16]):
            out.append(f"  master {i:<3} {n:>8} partitions  {b / 2**20:>10,.1f} MiB")
        if len(rows) > 16:
            out.append(f"  ... {len(rows) - 16} more masters (--json lists all)")
        if c["advice"]:
            out.append(f"advice      cluster: {c['advice']}")
    for note in rec.notes:
        out.append(f"note        {note}")
    if rec.verify:
        v = rec.verify
        out.append(f"verify      predicted {v['predicted_bytes_per_item']:.2f} B/item, measured "
                   f"{v['measured_bytes_per_item']:.2f} ({v['error_pct']:+.2f}%): {v['how']}, on {v['measured_on']}")
    return out


def main() -> None:
    """Run `plan` alone with densekv's error handling: one line and exit 2 for expected errors."""
    from densekv.tools.cli_run import run_command

    run_command(plan)
