"""DIR/report.html, DIR/*.png: the lab's report, drawn from this run's outputs only.

The HTML is self-contained (CSS inline, every PNG embedded as a base64 data URI, no
script, no external link), so it can be mailed or attached to a ticket. Every figure
carries how it was measured and on what: the experiment's method, the server's name,
version, allocator and the listpack settings in force. Numbers in tables come from the
run's records; nothing is typed in here.

matplotlib is optional (the `densekv[lab]` extra) and imported only when drawing, with
the Agg renderer and no pyplot (no global state, no display needed).
"""

from __future__ import annotations

import base64
import html
import importlib
import io
import re
from pathlib import Path
from typing import Any

from densekv.lab.experiments.base import Experiment, FigureSpec, Output, TableSpec
from densekv.lab.target import LabError

SEEDS = {
    "000": "Optimising session key storage in Redis (Greg Beech)",
    "001": "Optimising Redis storage, part two (Julien Letessier)",
    "002": "Using Redis HASH instead of SET to reduce cache size (Salesforce Engineering)",
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

    fig = Figure(figsize=(9, 5), layout="constrained")
    FigureCanvasAgg(fig)
    spec.draw(fig)
    fig.suptitle(spec.title, fontsize=11)
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


def _stamp_line(stamp: dict[str, Any] | None) -> str:
    if stamp is None:
        return ""
    lp = ", ".join(f"{k.replace('_', '-')} {v}" for k, v in stamp["listpack"].items() if v is not None)
    where = "started by the lab" if stamp["scratch"] else f"your server {stamp.get('url') or ''}"
    return (f"Measured on {stamp['name']}: {stamp['flavor']} {stamp['version']}, allocator "
            f"{stamp['allocator']} ({where}); listpack settings: {lp}.")


def _table(spec: TableSpec) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in spec.columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(_fmt(v))}</td>" for v in row) + "</tr>" for row in spec.rows)
    caption = f"<p class=caption>{_e(spec.caption)}</p>" if spec.caption else ""
    return f"<h4>{_e(spec.title)}</h4><table><tr>{head}</tr>{body}</table>{caption}"


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1080px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em} td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:right} th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
figure{margin:1em 0} img{max-width:100%;border:1px solid #eee} figcaption,.caption{font-size:.88em;color:#555}
.status{display:inline-block;padding:0 .5em;border-radius:3px;font-size:.85em}
.ran{background:#dfd} .na{background:#eee} .failed{background:#fdd} .note{color:#8a5a00}
"""


def write_report(doc: dict[str, Any], outputs: list[Output], experiments: list[Experiment],
                 out_dir: Path) -> dict[str, Path]:
    """Draw every figure to DIR/*.png and write DIR/report.html; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stamps = {s["name"]: s for s in doc["servers"]}
    paths: dict[str, Path] = {}
    parts = [f"<!doctype html><html><head><meta charset=utf-8><title>densekv lab report</title>"
             f"<style>{STYLE}</style></head><body>"]
    parts.append("<h1>densekv lab report</h1>")
    host = doc["host"]
    parts.append(
        f"<p>Run {_e(doc['created_at'])} with <code>{_e(doc['command'])}</code> (densekv {_e(doc['densekv_version'])}, "
        f"N = {doc['n']:,}) on a {host['cpus']}-CPU {_e(host['platform'])}, Python {_e(host['python'])}. "
        "Every number and figure below comes from this run; the raw records are in <code>results.json</code> "
        "(schema: docs/lab-results.md).</p>"
    )
    parts.append("<h2>Servers</h2>" + _servers_table(doc["servers"]))
    parts.append("<h2>Experiments</h2><table><tr><th>experiment</th><th>seed</th><th>server</th><th>status</th>"
                 "<th>seconds</th><th>note</th></tr>")
    for exp in doc["experiments"]:
        cls = {"ran": "ran", "failed": "failed"}.get(exp["status"], "na")
        parts.append(f"<tr><td><a href='#{_e(exp['kind'])}'>{_e(exp['title'])}</a></td><td>{_e(exp['seed'] or '-')}</td>"
                     f"<td>{_e(exp['server'] or '-')}</td><td><span class='status {cls}'>{_e(exp['status'])}</span></td>"
                     f"<td>{_e(_fmt(exp['seconds']))}</td><td>{_e(exp['reason'])}</td></tr>")
    parts.append("</table>")
    for exp in experiments:
        mine = [o for o in outputs if o.kind == exp.kind]
        parts.append(f"<h2 id='{_e(exp.kind)}'>{_e(exp.title)}</h2>")
        if exp.seed:
            parts.append(f"<p>Reproduces seed {exp.seed}: <em>{_e(SEEDS.get(exp.seed, ''))}</em>.</p>")
        for out in mine:
            parts.append(_section(out, exp, stamps, out_dir, paths))
    parts.append("</body></html>")
    report = out_dir / "report.html"
    report.write_text("".join(parts))
    paths["report"] = report
    return paths


def _servers_table(servers: list[dict[str, Any]]) -> str:
    if not servers:
        return "<p>No server was measured.</p>"
    keys = list(servers[0]["listpack"])
    head = "".join(f"<th>{_e(k.replace('_', '-'))}</th>" for k in keys)
    rows = []
    for s in servers:
        where = "scratch (started by the lab)" if s["scratch"] else f"user's server {s.get('url') or ''}"
        cells = "".join(f"<td>{_e(_fmt(s['listpack'].get(k)))}</td>" for k in keys)
        rows.append(f"<tr><td>{_e(s['name'])}</td><td>{_e(s['flavor'])} {_e(s['version'])}</td>"
                    f"<td>{_e(s['allocator'])}</td><td>{_e(s['maxmemory_policy'])}</td><td>{_e(where)}</td>{cells}</tr>")
    return ("<table><tr><th>server</th><th>version</th><th>allocator</th><th>maxmemory-policy</th><th>where</th>"
            f"{head}</tr>{''.join(rows)}</table>")


def _section(out: Output, exp: Experiment, stamps: dict[str, dict[str, Any]], out_dir: Path,
             paths: dict[str, Path]) -> str:
    where = f" on {out.server}" if out.server else ""
    if out.status != "ran":
        cls = "failed" if out.status == "failed" else "na"
        return (f"<h3>{_e(exp.kind)}{_e(where)}</h3><p><span class='status {cls}'>{_e(out.status)}</span> "
                f"{_e(out.reason)}</p>"
                + ("<p>No figures or numbers are shown for it: nothing was measured.</p>" if out.status != "failed" else ""))
    parts = [f"<h3>{_e(exp.kind)}{_e(where)}</h3>"]
    stamp = stamps.get(out.server) if out.server else None
    method = "".join(f"<p>{_e(m)}</p>" for m in out.method)
    parts.append(f"<h4>How it was measured</h4>{method}")
    if stamp:
        parts.append(f"<p>{_e(_stamp_line(stamp))}</p>")
    elif out.server is None and stamps:
        parts.append("<p>" + " ".join(_e(_stamp_line(s)) for s in stamps.values()) + "</p>")
    for fig in out.figures:
        png = render_png(fig)
        name = f"{_slug(out.kind)}-{_slug(out.server or 'all')}-{_slug(fig.name)}.png"
        (out_dir / name).write_bytes(png)
        paths[name] = out_dir / name
        data = base64.b64encode(png).decode()
        how = _stamp_line(stamp) if stamp else "Measured on every server listed above."
        parts.append(f"<figure><img alt='{_e(fig.title)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption><b>{_e(fig.title)}.</b> {_e(fig.caption)} {_e(how)} "
                     f"(file: {_e(name)})</figcaption></figure>")
    for table in out.tables:
        parts.append(_table(table))
    for note in out.notes:
        parts.append(f"<p class=note>Note: {_e(note)}</p>")
    return "".join(parts)
