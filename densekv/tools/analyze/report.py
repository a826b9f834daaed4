"""The analysis as a terminal table (rich), one JSON object (--json), or an HTML page (--html).

JSON (`densekv analyze --json`), one object:
    keys_total      int    keys on the server (DBSIZE of every node when the scan began;
                           keys seen, for --full or after a names pass)
    keys_sampled    int    keys the scan looked at one by one
    mode            "sample" | "full";  complete: bool (false: stopped, see interrupted)
    counted         bool   every key was counted by name (the names pass): keys exact
    server          {url (no password), flavor, version, cluster, nodes, db}; with --rdb:
                    url is the files, nodes one per file, flavor and version the server
                    that loaded them
    rdb             null, or with --rdb {files [{file, rdb_version, written_by}], server
                    (the matrix name that loaded them), version, db, other_dbs {file:
                    {db: keys}} (keys in databases not analyzed)}
    scratch         {server, version, note} where the replay measured, or null
    scan            {seconds, commands, vanished, patterns, overflow_keys}
    bytes_now, bytes_densekv, saving     totals over the patterns
    patterns        sorted by bytes saved, each:
      pattern str, glob str (SCAN MATCH), namespace str (the densekv name its command and
      replay use), keys int, keys_interval [low, high] (zero width when counted),
      bytes_now int (MEMORY USAGE of the pattern's keys, extrapolated, plus the per-key
      bytes MEMORY USAGE misses, measured by the replay), bytes_now_interval [low, high],
      bytes_densekv int | null (measured in the recommended layout, extrapolated; equal
      to bytes_now when the pattern is left as it is; null when not measured),
      saving float | null (fraction of bytes_now), interval [low, high] (95% interval of
      the bytes saved), measured_saving (what the replay measured, even under 20%),
      recommendation str (sessions | set | set-members | family | map | map-zstd |
      "leave as is"), reason str, command str ("-" when nothing is to run), sampled,
      type / types / encoding / encodings / ttl / ttl_share / sizes (MEMORY USAGE
      buckets) / memory_usage_mean / shapes / sessions (distributions seen in the
      sample), overhead_per_key, replay {as_is {...}, densekv {...}}, {as_is {...}} alone
      (a pattern densekv has no layout for, measured as it is) or {skipped}.

HTML: one self-contained page in the lab report's style (its CSS), with a bar per pattern
(bytes now and with densekv, to scale) and the same table and details.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from densekv.tools.lab.report import STYLE


def human(n: float | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return str(n)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, default=str)


def _confidence(row: dict[str, Any], doc: dict[str, Any]) -> str:
    lo, hi = row["interval"]
    if row["saving"] in (None, 0.0) or lo == hi:
        return "exact scan" if doc["mode"] == "full" and row["saving"] else "-"
    return f"{human(lo)}..{human(hi)}"


def _source(doc: dict[str, Any]) -> str:
    """What was analyzed: the live server, or the dumps and the server that loaded them."""
    rdb = doc.get("rdb")
    if not rdb:
        return f"{doc['server']['flavor']} {doc['server']['version']} at {doc['server']['url']}"
    files = ", ".join(f"{f['file']} (RDB {f['rdb_version']}, {f['written_by']})" for f in rdb["files"])
    return f"{files} loaded into {rdb['server']} {rdb['version']}" + (f", db {rdb['db']}" if rdb["db"] else "")


def print_terminal(doc: dict[str, Any], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    if console is None:
        import sys

        console = Console(width=None if sys.stdout.isatty() else 160)
    mode = "every key" if doc["mode"] == "full" else f"{doc['keys_sampled']:,} keys sampled" + \
        (", every key counted by name" if doc.get("counted") else "")
    title = f"densekv analyze: {_source(doc)} - {doc['keys_total']:,} keys, {mode}"
    table = Table(title=title, title_justify="left")
    for col, just in (("#", "right"), ("pattern", "left"), ("keys", "right"), ("bytes now", "right"),
                      ("with densekv", "right"), ("saving", "right"), ("95% saved", "right")):
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("recommendation", ratio=1)
    commands: list[tuple[int, str]] = []
    for i, row in enumerate(doc["patterns"], 1):
        if row["command"] != "-":
            commands.append((i, row["command"]))
        table.add_row(str(i), row["pattern"], f"{row['keys']:,}", human(row["bytes_now"]),
                      human(row["bytes_densekv"]), pct(row["saving"]), _confidence(row, doc),
                      f"{row['recommendation']}: {row['reason']}")
    console.print(table, markup=False)
    if any(r["bytes_densekv"] is not None for r in doc["patterns"]):
        console.print(f"total: {human(doc['bytes_now'])} now, {human(doc['bytes_densekv'])} with densekv "
                      f"({pct(doc['saving'])} less) over the patterns above", highlight=False)
    else:
        console.print(f"total: {human(doc['bytes_now'])} now (savings not measured)", highlight=False)
    if doc.get("scratch"):
        s = doc["scratch"]
        console.print(f"measured by replaying samples on {s['server']} {s['version']}"
                      + (f" ({s['note']})" if s["note"] else ""), highlight=False)
    if not doc["complete"]:
        console.print("[yellow]partial report:[/] the scan was stopped before the end; nothing was replayed "
                      "(rerun with the same --resume FILE to finish)")
    if commands:
        console.print("\nwhat to run:")
        for i, cmd in commands:
            console.print(f"  [{i}] {cmd}", highlight=False, markup=False, soft_wrap=True)


def _e(value: Any) -> str:
    return html.escape(str(value))


def write_html(doc: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = doc["patterns"]
    biggest = max([r["bytes_now"] for r in rows] or [1]) or 1
    css = STYLE + (".bar{height:.8em;display:inline-block} .now{background:#c66} .dk{background:#393}"
                   " td.bars{text-align:left;width:45%}")
    head = f"<!doctype html><html><head><meta charset=utf-8><title>densekv analyze</title><style>{css}</style>"
    scanned = "every key scanned" if doc["mode"] == "full" else f"{doc['keys_sampled']:,} sampled"
    intro = (f"<p>{_e(_source(doc))}: {doc['keys_total']:,} keys, {_e(scanned)} in {doc['scan']['seconds']:.1f} s. Total "
             f"{_e(human(doc['bytes_now']))} now, {_e(human(doc['bytes_densekv']))} with densekv "
             f"({_e(pct(doc['saving']))} less).</p>")
    parts = [head + "</head><body>", "<h1>densekv analyze</h1>", intro]
    if doc.get("scratch"):
        s = doc["scratch"]
        parts.append(f"<p>Savings measured by replaying each pattern's sampled keys on a scratch {_e(s['server'])} "
                     f"{_e(s['version'])}, as they are and in densekv's layout, with densekv's meter "
                     f"(used_memory deltas). {_e(s['note'])}</p>")
    if not doc["complete"]:
        parts.append("<p class=note>Partial report: the scan was stopped before the end and nothing was replayed."
                     "</p>")
    parts.append("<h2>Savings</h2><table><tr><th>pattern</th><th>keys</th><th>bytes now</th><th>with densekv</th>"
                 "<th>saving</th><th>95% saved</th><th>now (red) and with densekv (green), to scale</th></tr>")
    for row in rows:
        now_w = 100 * row["bytes_now"] / biggest
        dk = row["bytes_densekv"] if row["bytes_densekv"] is not None else row["bytes_now"]
        dk_w = 100 * dk / biggest
        parts.append(f"<tr><td>{_e(row['pattern'])}</td><td>{row['keys']:,}</td><td>{_e(human(row['bytes_now']))}</td>"
                     f"<td>{_e(human(row['bytes_densekv']))}</td><td>{_e(pct(row['saving']))}</td>"
                     f"<td>{_e(_confidence(row, doc))}</td><td class=bars>"
                     f"<span class='bar now' style='width:{now_w:.1f}%'></span><br>"
                     f"<span class='bar dk' style='width:{dk_w:.1f}%'></span></td></tr>")
    parts.append("</table><h2>What to run</h2><table><tr><th>pattern</th><th>recommendation</th><th>why</th>"
                 "<th>command</th></tr>")
    for row in rows:
        parts.append(f"<tr><td>{_e(row['pattern'])}</td><td>{_e(row['recommendation'])}</td>"
                     f"<td>{_e(row['reason'])}</td><td><code>{_e(row['command'])}</code></td></tr>")
    parts.append("</table><h2>What the sample holds</h2><table><tr><th>pattern</th><th>glob</th><th>types</th>"
                 "<th>encodings</th><th>TTL</th><th>MEMORY USAGE</th><th>values</th><th>replay</th></tr>")
    for row in rows:
        replay = row.get("replay", {})
        if "as_is" in replay:  # "densekv" too only when densekv has a layout for the pattern
            a, d = replay["as_is"], replay.get("densekv")
            how = f"{a['keys']} keys as they are: {a['bytes_per_key']} B/key" + \
                (f"; {d['layout']}: {d['bytes_per_item']} B/item" if d else "; no densekv layout to measure")
        else:
            how = replay.get("skipped", "-")
        parts.append(f"<tr><td>{_e(row['pattern'])}</td><td><code>{_e(row['glob'])}</code></td>"
                     f"<td>{_e(_dist(row['types']))}</td><td>{_e(_dist(row['encodings']))}</td>"
                     f"<td>{_e(_dist(row['ttl']))}</td><td>{_e(_dist(row['sizes']))}</td>"
                     f"<td>{_e(_dist(row['shapes']))}</td><td>{_e(how)}</td></tr>")
    parts.append("</table></body></html>")
    path = out_dir / "analyze.html"
    path.write_text("".join(parts))
    return path


def _dist(counter: dict[str, int]) -> str:
    total = sum(counter.values()) or 1
    return ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(counter.items(), key=lambda kv: -kv[1]))
