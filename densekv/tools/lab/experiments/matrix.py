"""Experiment 5: the server matrix - one table of bytes per item by layout x server.

It measures nothing itself: the runner runs the same suite (every other selected
experiment) on each server given with --server (or --server all), one server at a time,
and this experiment lines up their records: one row per measured configuration (kind
and variant), one column per server, the bytes per item at the run's N. A cell is empty
where a configuration was not measured on that server (fieldttl on a server without
field TTL, an interrupted run). With one server the table has one column, and says so.
"""

from __future__ import annotations

from typing import Any

from densekv.tools.lab.experiments.base import Experiment, FigureSpec, Output, TableSpec


class Matrix(Experiment):
    kind = "matrix"
    title = "Server matrix: bytes per item by layout x server"
    seed = None
    per_server = False
    not_on_cluster = ("it lines up servers side by side, and --cluster measures one cluster of one binary; to "
                      "compare servers, run the lab with --server all (without --cluster)")

    def combine(self, outputs: list[Output]) -> Output:
        out = Output(self.kind, None)
        records = [r for o in outputs for r in o.records if r.bytes_per_item is not None]
        servers = list(dict.fromkeys(f"{r.server} {r.version}" for r in records))
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for r in records:
            key = (r.kind, r.variant or r.layout)
            rows.setdefault(key, {})[f"{r.server} {r.version}"] = r
        table_rows = []
        for (kind, variant), cells in rows.items():
            first = next(iter(cells.values()))
            table_rows.append([kind, variant, f"{first.n:,}"] + [
                round(cells[s].bytes_per_item, 2) if s in cells else "-" for s in servers
            ])
        out.tables.append(TableSpec(
            "Bytes per item by configuration and server", ["kind", "configuration", "n"] + servers, table_rows,
            "Each cell: the record's bytes_per_item (used_memory delta / items at n) from this run.",
        ))
        out.method.append(
            "The same suite ran on each server in turn (each one started by the lab, or the --url server); "
            "this table lines up the records' bytes per item. Partition counts follow each server's own "
            "limits, so a row may use different partition counts on different servers (see results.json)."
        )
        if len(servers) < 2:
            out.notes.append(
                f"one server in this run ({servers[0] if servers else 'none'}): run with --server all "
                "(or several --server names) to compare servers"
            )
        sessions = [(v, cells) for (k, v), cells in rows.items() if k == "sessions"]
        if len(servers) >= 2 and sessions:
            out.figures.append(FigureSpec(
                "sessions-by-server", "Bytes per session by layout and server",
                "Grouped bars: the sessions experiment's bytes per session at the run's N on each server.",
                lambda fig: _plot(fig, sessions, servers),
            ))
        return out


def _plot(fig: Any, sessions: list[tuple[str, dict[str, Any]]], servers: list[str]) -> None:
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(servers)
    for i, server in enumerate(servers):
        xs = [j + (i - (len(servers) - 1) / 2) * width for j in range(len(sessions))]
        ys = [cells[server].bytes_per_item if server in cells else 0 for _, cells in sessions]
        ax.bar(xs, ys, width, label=server)
    ax.set_xticks(range(len(sessions)))
    ax.set_xticklabels([v for v, _ in sessions], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("bytes per session")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)


EXPERIMENT = Matrix()
