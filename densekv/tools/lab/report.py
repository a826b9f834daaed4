"""DIR/report.html, DIR/*.png: the lab's report, drawn from this run's outputs only.

The page answers first what to do on this server (summary.py: per kind, the obvious
layout against densekv's, bytes per item, the saving, the call to make), then what each
seed claimed and whether this run confirms it, then the servers (each one's version,
allocator and listpack settings stated once; every figure names the server it was
measured on and refers to that table), then each experiment: how it was measured, its
figures and tables, and at most one note. Numbers come from the run's records; nothing
is typed in but the seeds' claims.

The HTML is self-contained (CSS inline, every PNG embedded as a base64 data URI, no
script, no external link), so it can be mailed or attached to a ticket. matplotlib is
optional (the `densekv[lab]` extra) and imported only when drawing, with the Agg
renderer and no pyplot (no global state, no display needed).
"""

from __future__ import annotations

import base64
import html
import importlib
import io
import re
from pathlib import Path
from typing import Any

from densekv.errors import LabError
from densekv.tools.lab.experiments.base import Experiment, FigureSpec, Output, TableSpec
from densekv.tools.lab.summary import Advice, Verdict, advice, verdicts

SEEDS = {
    "000": "Optimising session key storage in Redis (Greg Beech)",
    "001": "Optimising Redis storage, part two (Julien Letessier)",
    "002": "Using Redis HASH instead of SET to reduce cache size (Salesforce Engineering)",
    "003": "Ruby on Rails session containers benchmarked with ab: memory, DRb, PStore, ActiveRecord",
    "004": "Zip'em ALL (me-redis)",
}


def require_matplotlib() -> None:
    try:
        importlib.import_module("matplotlib")
    except ImportError as exc:
        raise LabError(
            "the lab draws its plots with matplotlib, which is not installed: pip install 'densekv[lab]'"
        ) from exc


def render_png(spec: FigureSpec) -> bytes:
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=spec.size, layout="constrained")
    FigureCanvasAgg(fig)
    spec.draw(fig)
    fig.suptitle(spec.title, fontsize=12)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


def _e(value: Any) -> str:
    return html.escape(str(value))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _where(stamp: dict[str, Any]) -> str:
    cluster = stamp.get("cluster")
    if cluster:
        return (f"a cluster started by the lab: {cluster['masters']} masters ({', '.join(cluster['master_nodes'])}) "
                f"with {cluster['replicas_per_master']} replica each")
    return "started by the lab" if stamp["scratch"] else f"your server {stamp.get('url') or ''}".strip()


def _table(spec: TableSpec) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in spec.columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(_fmt(v))}</td>" for v in row) + "</tr>" for row in spec.rows)
    caption = f"<p class=caption>{_e(spec.caption)}</p>" if spec.caption else ""
    return f"<h4>{_e(spec.title)}</h4><table><tr>{head}</tr>{body}</table>{caption}"


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1180px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em} td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:right;vertical-align:top} th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
td.text,th.text{text-align:left;max-width:30em} td.todo{min-width:24em} figure{margin:1em 0} img{max-width:100%;border:1px solid #eee}
figcaption,.caption{font-size:.88em;color:#555} .lede{font-size:.95em;color:#444}
.status{display:inline-block;padding:0 .5em;border-radius:3px;font-size:.85em}
.ran{background:#dfd} .na{background:#eee} .failed{background:#fdd} .note{color:#8a5a00}
.banner{background:#fff3d6;border:1px solid #e0b050;padding:.5em .8em}
.saving{font-weight:bold;color:#1a6b1a} .verdict{margin:.3em 0}
"""


def write_report(doc: dict[str, Any], outputs: list[Output], experiments: list[Experiment],
                 out_dir: Path, cleaned: list[str] | None = None) -> dict[str, Path]:
    """Draw every figure to DIR/*.png and write DIR/report.html; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stamps = {s["name"]: s for s in doc["servers"]}
    paths: dict[str, Path] = {}
    parts = [(f"<!doctype html><html><head><meta charset=utf-8><title>densekv lab report</title>"
              f"<style>{STYLE}</style></head><body>"), "<h1>densekv lab report</h1>"]
    parts.append(_lede(doc, cleaned or []))
    tips = advice(doc)
    found = verdicts(doc)
    parts.append("<h2 id=todo>What to do on your server</h2>" + _advice(tips, len(stamps) > 1))
    if found:
        parts.append("<h2 id=seeds>What the seeds claimed, and what this run found</h2>"
                     + "".join(_verdict(v, len(stamps) > 1) for v in found))
    parts.append("<h2 id=servers>Servers</h2>" + _servers_table(doc["servers"])
                 + "<p class=caption>Every figure and table below names the server it was measured on; its version, "
                 "allocator and listpack settings are the ones in this table (a raised-limits curve states its "
                 "own).</p>")
    parts.append(_experiments_table(doc))
    for exp in experiments:
        mine = [o for o in outputs if o.kind == exp.kind]
        parts.append(f"<h2 id='{_e(exp.kind)}'>{_e(exp.title)}</h2>")
        if exp.seed:
            parts.append(f"<p>Reproduces seed {exp.seed}: <em>{_e(SEEDS.get(exp.seed, ''))}</em>.</p>")
        parts += [f"<p class=verdict>{_e(v.sentence)}</p>" for v in found if v.kind == exp.kind]
        for out in mine:
            parts.append(_section(out, exp, stamps, out_dir, paths))
    parts.append("</body></html>")
    report = out_dir / "report.html"
    report.write_text("".join(parts))
    paths["report"] = report
    return paths


def _lede(doc: dict[str, Any], cleaned: list[str]) -> str:
    host = doc["host"]
    servers = ", ".join(f"{s['name']} ({s['flavor']} {s['version']}, {_where(s)})" for s in doc["servers"]) or "none"
    text = (f"<p class=lede>Run {_e(doc['created_at'])} with <code>{_e(doc['command'])}</code> (densekv "
            f"{_e(doc['densekv_version'])}) on a {host['cpus']}-CPU {_e(host['platform'])}, Python "
            f"{_e(host['python'])}; measured on {_e(servers)}. Every number and figure below comes from this "
            "run; the raw records are in <code>results.json</code> (schema: docs/lab-results.md).</p>")
    trimmed = [e for e in doc["experiments"] if e.get("trimmed")]
    paces = [e["pace"] for e in doc["experiments"] if e.get("pace")]
    if trimmed:
        text += ("<p class=lede><b>Sized for this machine</b> (pace " + _e(_pace_range(paces)) + " the reference "
                 "machine's): every configuration of every story was measured, with less work - "
                 + "; ".join(_e(f"{e['kind']}: {e['trimmed']}") for e in trimmed) + ".</p>")
    elif paces:
        text += (f"<p class=lede>Every experiment ran at full size (pace {_e(_pace_range(paces))} the reference "
                 "machine's).</p>")
    if doc.get("interrupted"):
        done = sum(1 for e in doc["experiments"] if e["status"] == "ran")
        text += (f"<p class=banner>Interrupted (Ctrl-C): a partial report. {done} experiments ran to the end; "
                 "the one running shows the configurations it had measured, the rest did not run.</p>")
    for line in cleaned:
        text += f"<p class=lede>{_e(line)}.</p>"
    for s in doc["servers"]:
        if s.get("cluster"):
            skipped = [e["kind"] for e in doc["experiments"] if e["status"] == "skipped"
                       and e["reason"].startswith("not run on a cluster")]
            text += (f"<p class=banner><b>Per cluster.</b> On {_e(s['name'])} every bytes-per-item figure is per "
                     "cluster: the sum over its masters of each master's used_memory delta. Replicas hold a copy "
                     "each and are not counted (with R replicas per master the cluster holds about 1 + R times "
                     "these bytes). Each experiment's section lists the bytes of every master and the imbalance "
                     "(largest master / mean) beside the totals."
                     + (f" Not run on the cluster, each with its reason below: {_e(', '.join(skipped))}."
                        if skipped else "") + "</p>")
    return text


def _pace_range(paces: list[float]) -> str:
    lo, hi = min(paces), max(paces)
    return f"{lo:.1f}x" if abs(hi - lo) < 0.05 else f"{lo:.1f}x-{hi:.1f}x"


def _advice(tips: list[Advice], several: bool) -> str:
    if not tips:
        return "<p>Nothing to recommend from this run: no experiment measured both layouts of a comparison.</p>"
    head = (("<th class=text>server</th>" if several else "") + "<th class=text>data</th><th class=text>obvious "
            "layout</th><th>B/item</th><th class=text>densekv's choice</th><th>B/item</th><th>saving</th>"
            "<th>GiB saved per 100M items</th><th>server µs per read (obvious / densekv)</th>"
            "<th class=text>what to do</th>")
    rows = []
    for a in tips:
        usec = ("-" if a.plain_usec is None or a.chosen_usec is None
                else f"{a.plain_usec:.2f} / {a.chosen_usec:.2f}")
        rows.append("<tr>" + (f"<td>{_e(a.server)}</td>" if several else "")
                    + f"<td class=text>{_e(a.what)}</td><td class=text>{_e(a.plain)}</td>"
                    f"<td>{a.plain_bytes:,.1f}</td><td class=text>{_e(a.chosen)}</td><td>{a.chosen_bytes:,.1f}</td>"
                    f"<td class=saving>{a.saving:.0%}</td><td>{a.gib_per_100m:,.1f}</td><td>{_e(usec)}</td>"
                    f"<td class='text todo'><code>{_e(a.call)}</code><br><span class=caption>{_e(a.todo)}</span></td></tr>")
    return (f"<table><tr>{head}</tr>{''.join(rows)}</table><p class=caption>B/item: used_memory delta per item "
            "(session, ID, value, member), measured in this run on this server; saving: the share of the obvious "
            "layout's bytes that densekv's choice does not use; server µs per read: INFO commandstats time of a "
            "get / contains. The details, curves and every other layout follow below.</p>")


def _verdict(v: Verdict, several: bool) -> str:
    where = f" ({v.server})" if several else ""
    return f"<p class=verdict><a href='#{_e(v.kind)}'>{_e(v.kind)}</a>{_e(where)}: {_e(v.sentence)}</p>"


def _experiments_table(doc: dict[str, Any]) -> str:
    rows = []
    for exp in doc["experiments"]:
        cls = {"ran": "ran", "failed": "failed"}.get(exp["status"], "na")
        rows.append(f"<tr><td><a href='#{_e(exp['kind'])}'>{_e(exp['title'])}</a></td><td>{_e(exp['seed'] or '-')}</td>"
                    f"<td>{_e(exp['server'] or '-')}</td><td><span class='status {cls}'>{_e(exp['status'])}</span></td>"
                    f"<td>{_e(_fmt(exp['seconds']))}</td><td class=text>{_e(exp.get('trimmed') or '-')}</td>"
                    f"<td class=text>{_e(exp['reason'])}</td></tr>")
    return ("<h2 id=experiments>Experiments</h2><table><tr><th>experiment</th><th>seed</th><th>server</th>"
            "<th>status</th><th>seconds</th><th>sized for this machine</th><th>reason</th></tr>"
            + "".join(rows) + "</table>")


def _servers_table(servers: list[dict[str, Any]]) -> str:
    if not servers:
        return "<p>No server was measured.</p>"
    keys = list(servers[0]["listpack"])
    head = "".join(f"<th>{_e(k.replace('_', '-'))}</th>" for k in keys)
    rows = []
    for s in servers:
        cells = "".join(f"<td>{_e(_fmt(s['listpack'].get(k)))}</td>" for k in keys)
        rows.append(f"<tr><td id='server-{_e(_slug(s['name']))}'>{_e(s['name'])}</td><td>{_e(s['flavor'])} "
                    f"{_e(s['version'])}</td><td>{_e(s['allocator'])}</td><td>{_e(s['maxmemory_policy'])}</td>"
                    f"<td class=text>{_e(_where(s))}</td>{cells}</tr>")
    return ("<table><tr><th>server</th><th>version</th><th>allocator</th><th>maxmemory-policy</th><th>where</th>"
            f"{head}</tr>{''.join(rows)}</table>")


def _measured_on(out: Output, stamps: dict[str, dict[str, Any]]) -> str:
    if out.server is None:
        return "Measured on every server listed under Servers."
    stamp = stamps.get(out.server)
    if stamp is None:
        return f"Measured on {out.server}."
    return f"Measured on {stamp['name']} ({stamp['flavor']} {stamp['version']}; settings under Servers)."


def _section(out: Output, exp: Experiment, stamps: dict[str, dict[str, Any]], out_dir: Path,
             paths: dict[str, Path]) -> str:
    where = f" on {out.server}" if out.server else ""
    if out.status == "interrupted":
        return (f"<h3>{_e(exp.kind)}{_e(where)}</h3><p><span class='status na'>interrupted</span> {_e(out.reason)}."
                "</p>" + (_records_table(out) if out.records else ""))
    if out.status != "ran":
        cls = "failed" if out.status == "failed" else "na"
        return (f"<h3>{_e(exp.kind)}{_e(where)}</h3><p><span class='status {cls}'>{_e(out.status)}</span> "
                f"{_e(out.reason)}</p>"
                + ("<p>No figures or numbers are shown for it: nothing was measured.</p>" if out.status != "failed" else ""))
    parts = [f"<h3>{_e(exp.kind)}{_e(where)}</h3>"]
    method = "".join(f"<p>{_e(m)}</p>" for m in out.method)
    parts.append(f"<h4>How it was measured</h4>{method}<p>{_e(_measured_on(out, stamps))}"
                 + (f" Sized for this machine: {_e(out.trimmed)}." if out.trimmed else "") + "</p>")
    for fig in out.figures:
        png = render_png(fig)
        name = f"{_slug(out.kind)}-{_slug(out.server or 'all')}-{_slug(fig.name)}.png"
        (out_dir / name).write_bytes(png)
        paths[name] = out_dir / name
        data = base64.b64encode(png).decode()
        on = f" On {out.server}." if out.server else ""
        parts.append(f"<figure><img alt='{_e(fig.title)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption><b>{_e(fig.title)}.</b> {_e(fig.caption)}{_e(on)} (file: {_e(name)})"
                     "</figcaption></figure>")
    for table in out.tables:
        parts.append(_table(table))
    if out.notes:
        parts.append(f"<p class=note>Note: {_e('; '.join(out.notes))}.</p>")
    return "".join(parts)


def _records_table(out: Output) -> str:
    rows = [[r.variant or r.layout, r.partitions if r.partitions is not None else "-", r.n,
             None if r.bytes_per_item is None else round(r.bytes_per_item, 2), r.op or "-", r.ops_per_s]
            for r in out.records]
    return _table(TableSpec("Measured before the interruption", ["configuration", "partitions", "n",
                                                                 "bytes/item", "operation", "ops/s"], rows))
