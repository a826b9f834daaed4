"""What a container run found, in sentences with the numbers, and its figures.

Input: the records of harness.run_containers (one per container and N), or the
"containers" records of a results.json document (summary.py): `trends` reads both.

The seed's verdict per container (`Trend`): from the container's own points, read-only,
its capacity at the largest N against the smallest - 1 / CPU per request (app worker
plus the store's processes, which other work on the machine moves far less than req/s),
or req/s when CPU was not measured. "falls" when more than FALLS (half) of it is lost,
i.e. a read costs more than twice the CPU; "flat" otherwise. Seed 003's falls were 10x
and more; points of one flat container on a busy 2-core machine differ by up to ~30% in
CPU per request, so the line sits well above that noise and well below the seed's falls.
The verdict is set beside what seed 003 found for that kind of container
(registry.Container.seed). FLAT (15%) is the looser word of the other sentences.

Each figure comes with the finding it shows, said in one sentence beside it. Drawing
functions take a matplotlib Figure (the lab's report calls them; matplotlib is imported
by the caller, not here).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FLAT = 0.15
FALLS = 0.5  # capacity lost from the smallest N to the largest that makes a verdict "falls"
REDIS_LIKE = ("redis-json", "densekv", "densekv-dense", "memcached")
COLORS = {
    "none": "#7f7f7f", "dict": "#17becf", "memcached": "#bcbd22", "files-flat": "#d62728",
    "files-hashed": "#ff9896", "sqlite-indexed": "#1f77b4", "sqlite-unindexed": "#aec7e8",
    "postgres-indexed": "#9467bd", "postgres-unindexed": "#c5b0d5", "redis-json": "#ff7f0e",
    "densekv": "#2ca02c", "densekv-dense": "#98df8a",
}


def filesystem_of(path: Path) -> str:
    """The file system type holding `path` (from /proc/mounts), or "unknown"."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    real = os.path.realpath(path)
    best = ("", "unknown")
    for parts in mounts:
        inside = len(parts) >= 3 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/"))
        if inside and len(parts[1]) >= len(best[0]):
            best = (parts[1], parts[2])
    return best[1]


# -- reading the records ---------------------------------------------------------------


def curves(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """container -> its records in N order (containers in the order first seen)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(r["container"], []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r["n"])
    return out


def _rps(r: dict[str, Any], mix: str = "ro") -> float:
    return float(r[mix]["rps"])


def _cpu(r: dict[str, Any], mix: str = "ro") -> float:
    """CPU µs per request, app worker plus store processes (0 if not measured)."""
    return float(r[mix].get("app_cpu_us", 0) + r[mix].get("store_cpu_us", 0))


def _pct(a: float, b: float) -> float:
    return (b - a) / a * 100 if a else 0.0


def ceiling(c: dict[str, list[dict[str, Any]]], mix: str = "ro") -> dict[int, float]:
    """N -> req/s of the no-session app in the same rounds: dividing by it takes out what
    the machine did meanwhile (other work on a shared machine moves every container alike)."""
    return {r["n"]: _rps(r, mix) for r in c.get("none", [])}


def _relative(rs: list[dict[str, Any]], top: dict[int, float], mix: str = "ro") -> tuple[float, float] | None:
    ca, cb = top.get(rs[0]["n"]), top.get(rs[-1]["n"])
    if not ca or not cb:
        return None
    return _rps(rs[0], mix) / ca, _rps(rs[-1], mix) / cb


def label_of(rs: list[dict[str, Any]]) -> str:
    return str(rs[0]["label"])


def rps_findings(records: Sequence[dict[str, Any]], filesystem: str) -> list[str]:
    """The seed's findings about throughput, one sentence per group of containers, each
    container with its verdict from its points (Trend)."""
    found = {t.container: t for t in trends(records)}
    if not found:
        return []
    top = max(r["n"] for r in records)
    out = []
    memory = [found[m] for m in ("dict", "memcached", "redis-json", "densekv", "densekv-dense") if m in found]
    if memory:
        out.append(f"In-memory containers, read-only, from N = 0 to {top:,} stored sessions (seed 003: in-process "
                   "memory and DRb flat, bar a GC dip): " + "; ".join(t.short for t in memory) + ".")
    files = [found[m] for m in ("files-flat", "files-hashed") if m in found]
    if files:
        out.append(f"A file per session on {filesystem} (seed 003: PStore's flat directory nearly 10x slower by 126k "
                   "sessions on NetBSD FFS): " + "; ".join(t.short for t in files) + ".")
    sql = [found[m] for m in ("sqlite-unindexed", "sqlite-indexed", "postgres-unindexed", "postgres-indexed")
           if m in found]
    if sql:
        out.append("SQL (seed 003: ActiveRecord without an index on sessid fell off, with one it stayed flat to "
                   "50k): " + "; ".join(t.short for t in sql) + ".")
    return out


# -- the seed's verdict per container ------------------------------------------------------


@dataclass(frozen=True)
class Point:
    n: int
    rps: float  # read-only requests per second, median of rounds
    cpu_us: float  # CPU µs per read-only request, app worker + store processes (0: not measured)


@dataclass(frozen=True)
class Trend:
    """One container's read-only points as stored sessions grow, and what they say."""

    container: str
    label: str
    points: tuple[Point, ...]

    @property
    def by_cpu(self) -> bool:
        return all(p.cpu_us > 0 for p in self.points)

    @property
    def change(self) -> float:
        """Capacity at the largest N against the smallest, -0.9 = 90% less."""
        a, b = self.points[0], self.points[-1]
        if self.by_cpu:
            return a.cpu_us / b.cpu_us - 1
        return b.rps / a.rps - 1 if a.rps else 0.0

    @property
    def verdict(self) -> str:
        if len(self.points) < 2:
            return "unknown"
        return "falls" if self.change < -FALLS else "flat"

    @property
    def seed(self) -> str:
        from densekv.tools.lab.containers.registry import BY_NAME

        c = BY_NAME.get(self.container)
        return c.seed if c else "flat"

    @property
    def seed_says(self) -> str:
        from densekv.tools.lab.containers.registry import BY_NAME

        c = BY_NAME.get(self.container)
        return c.seed_says if c else ""

    @property
    def agrees(self) -> bool:
        return (self.verdict == "falls") == (self.seed == "falls")

    @property
    def evidence(self) -> str:
        a, b = self.points[0], self.points[-1]
        cpu = (f"CPU per read {a.cpu_us:,.1f} -> {b.cpu_us:,.1f} µs" if self.by_cpu
               else "CPU per request not measured")
        return (f"{cpu}, {a.rps:,.0f} -> {b.rps:,.0f} req/s from N = {a.n:,} to {b.n:,} (capacity "
                f"{self.change:+.0%}, by {'CPU per request' if self.by_cpu else 'req/s'})")

    @property
    def short(self) -> str:
        return f"{self.label} {self.verdict} ({self.evidence})"


def _as_point(r: dict[str, Any]) -> tuple[str, str, Point]:
    """(container, label, read-only point) of a harness record or a results.json record."""
    if "ro" in r:
        name, label, ro = str(r["container"]), str(r["label"]), r["ro"]
    else:
        name, label, ro = str(r["layout"]), str(r.get("variant") or r["layout"]), (r.get("ops") or {}).get("read", {})
    cpu = float(ro.get("app_cpu_us", 0) or 0) + float(ro.get("store_cpu_us", 0) or 0)
    return name, label, Point(int(r["n"]), float(ro.get("rps") or 0), round(cpu, 1))


def trends(records: Iterable[dict[str, Any]]) -> list[Trend]:
    """Per container (in the order first seen), its points in N order."""
    by: dict[str, tuple[str, list[Point]]] = {}
    for r in records:
        name, label, point = _as_point(r)
        by.setdefault(name, (label, []))[1].append(point)
    return [Trend(name, label, tuple(sorted(points, key=lambda p: p.n))) for name, (label, points) in by.items()]


def trend_line(t: Trend) -> str:
    """One container's curve and verdict on one line (the lab's terminal summary)."""
    ns = " / ".join(f"{p.n:,}" for p in t.points)
    rps = " / ".join(f"{p.rps:,.0f}" for p in t.points)
    cpu = " / ".join(f"{p.cpu_us:,.1f}" for p in t.points)
    seed = "as in seed 003" if t.agrees else f"seed 003: {t.seed}"
    return (f"{t.label} {t.verdict} ({seed}; capacity {t.change:+.0%}): N {ns} - read req/s {rps}, "
            f"CPU µs per read {cpu}")


def draw_cpu(fig: Any, records: Sequence[dict[str, Any]]) -> None:
    """CPU per read-only request against N, one line per container, its verdict in the legend."""
    ax = fig.add_subplot(1, 1, 1)
    ns = sorted({r["n"] for r in records})
    for t in trends(records):
        if not t.by_cpu:
            continue
        ax.plot([p.n for p in t.points], [p.cpu_us for p in t.points], marker="o", color=COLORS.get(t.container),
                linestyle="--" if t.container == "none" else "-", label=f"{t.label}: {t.verdict}")
    _xaxis(ax, ns)
    ax.set_yscale("log")
    ax.set_ylabel("CPU µs per read-only request (app + store)")
    ax.legend(fontsize=7, loc="upper left")


def densekv_findings(records: Sequence[dict[str, Any]]) -> list[str]:
    """The issue's bar for densekv: flat within 10%, within 10% of the dict, fewest bytes."""
    c = curves(records)
    out = []
    for name in ("densekv", "densekv-dense"):
        if name not in c:
            continue
        rs = c[name]
        first, last = _rps(rs[0]), _rps(rs[-1])
        worst = min(rs, key=lambda r: _rps(r) / max(1e-9, first))
        line = (f"{label_of(rs)}: read-only {first:,.0f} req/s at N = {rs[0]['n']:,}, {last:,.0f} at "
                f"N = {rs[-1]['n']:,} ({_pct(first, last):+.0f}%; lowest {_rps(worst):,.0f} at N = {worst['n']:,})")
        rel = _relative(rs, ceiling(c))
        if rel is not None:
            line += f", {rel[0]:.0%} -> {rel[1]:.0%} of the no-session ceiling ({_pct(*rel):+.0f}%)"
        if "dict" in c:
            by_n = {r["n"]: r for r in c["dict"]}
            ratios = [(_rps(r) / _rps(by_n[r["n"]]), r["n"]) for r in rs if r["n"] in by_n and _rps(by_n[r["n"]])]
            if ratios:
                low = min(ratios)
                line += f"; against the in-process dict {min(x for x, _ in ratios):.0%} to " \
                        f"{max(x for x, _ in ratios):.0%} of its req/s (lowest at N = {low[1]:,})"
            cpu = [(_cpu(r), _cpu(by_n[r["n"]])) for r in rs if r["n"] in by_n]
            if cpu and all(a and b for a, b in cpu):
                line += (f"; CPU per read {cpu[0][0]:,.0f} -> {cpu[-1][0]:,.0f} µs against the dict's "
                         f"{cpu[0][1]:,.0f} -> {cpu[-1][1]:,.0f} µs")
        out.append(line + ".")
    return out


def bytes_table(records: Sequence[dict[str, Any]]) -> list[tuple[str, float]]:
    """(label, bytes per session at the largest N measured) for every container with bytes."""
    out = []
    for rs in curves(records).values():
        known = [r for r in rs if r.get("bytes_per_session") is not None]
        if known:
            out.append((label_of(rs), float(known[-1]["bytes_per_session"])))
    return sorted(out, key=lambda t: t[1])


def bytes_finding(records: Sequence[dict[str, Any]]) -> str:
    table = bytes_table(records)
    if not table:
        return ""
    top = max(r["n"] for r in records)
    ranked = ", ".join(f"{label} {b:,.0f}" for label, b in table)
    densekv = [t for t in table if t[0].startswith("densekv")]
    if densekv:
        best = table[0]
        if best[0].startswith("densekv"):
            runner = next((t for t in table if not t[0].startswith("densekv")), None)
            lead = f"{best[0]} stores a session in the fewest bytes, {best[1]:,.0f} B" + (
                f" ({runner[1] / best[1]:.1f}x less than the next, {runner[0]})" if runner else "")
        else:
            lead = f"densekv is not the smallest: {best[0]} takes {best[1]:,.0f} B against {densekv[0][1]:,.0f} B"
    else:
        lead = "densekv was not measured"
    return f"Bytes per stored session at N = {top:,}: {lead}; all, fewest first: {ranked} B."


def housekeeping_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per container, its housekeeping at the largest N where it ran."""
    rows = []
    for rs in curves(records).values():
        done = [r for r in rs if r.get("housekeeping")]
        if done:
            r = done[-1]
            hk = r["housekeeping"]
            rows.append({"label": r["label"], "container": r["container"], "n": r["n"], "seconds": hk["seconds"],
                         "removed": hk["removed"], "expired": hk["expired"], "rps_during": hk["during"]["rps"],
                         "rps_before": r["ro"]["rps"]})
    return rows


def housekeeping_finding(records: Sequence[dict[str, Any]]) -> str:
    rows = housekeeping_rows(records)
    if not rows:
        return ""
    parts = [f"{row['label']} {row['seconds']:.3f} s for {row['removed']:,} (serving {row['rps_during']:,.0f} "
             f"req/s meanwhile, {row['rps_before']:,.0f} before)" for row in rows]
    extra = ""
    if any(row["container"] == "dict" for row in rows):
        extra = " The dict is swept inside the only worker, which serves nothing while it runs."
    n = max(row["n"] for row in rows)
    return (f"Removing the N/2 expired sessions at N = {n:,} while serving (seed 003: nothing removes stale "
            "sessions unless the application does): " + "; ".join(parts) + "; memcached and Redis JSON+SETEX "
            "expire keys themselves." + extra)


# -- figures -------------------------------------------------------------------------------


def _xaxis(ax: Any, ns: list[int]) -> None:
    nonzero = [n for n in ns if n > 0]
    ax.set_xscale("symlog", linthresh=min(nonzero) if nonzero else 1)
    ax.set_xticks(ns)
    ax.set_xticklabels([f"{n:,}" for n in ns], rotation=30, fontsize=7)
    ax.set_xlabel("stored sessions (N)")
    ax.grid(True, which="both", alpha=0.3)


def _draw_per_mix(fig: Any, records: Sequence[dict[str, Any]],
                  value: Callable[[dict[str, Any]], float], ylabel: str, log: bool) -> None:
    """One panel per mix (read-only, read-write): value(record of one mix) per container vs N."""
    c = curves(records)
    ns = sorted({r["n"] for r in records})
    for i, (mix, title) in enumerate((("ro", "read-only"), ("rw", "read-write")), 1):
        ax = fig.add_subplot(1, 2, i)
        for name, rs in c.items():
            ax.plot([r["n"] for r in rs], [value(r[mix]) for r in rs], marker=".", label=label_of(rs),
                    color=COLORS.get(name), linestyle="--" if name == "none" else "-")
        _xaxis(ax, ns)
        if log:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7)


def draw_rps(fig: Any, records: Sequence[dict[str, Any]]) -> None:
    _draw_per_mix(fig, records, lambda m: m["rps"], "requests per second (median of rounds)", log=False)


def draw_p99(fig: Any, records: Sequence[dict[str, Any]]) -> None:
    _draw_per_mix(fig, records, lambda m: max(m["p99_ms"], 1e-3), "p99 latency, ms (median of rounds)", log=True)


def draw_bytes(fig: Any, records: Sequence[dict[str, Any]]) -> None:
    table = bytes_table(records)
    ax = fig.add_subplot(1, 1, 1)
    labels = [t[0] for t in table]
    values = [t[1] for t in table]
    colors = [COLORS.get(next((rs[0]["container"] for rs in curves(records).values() if label_of(rs) == lab), ""),
                         "#333333") for lab in labels]
    ax.barh(range(len(values)), values, color=colors)
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:,.0f} B", va="center", fontsize=8)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("bytes per stored session (log scale)")
    ax.grid(True, axis="x", which="both", alpha=0.3)


def draw_housekeeping(fig: Any, records: Sequence[dict[str, Any]]) -> None:
    rows = housekeeping_rows(records)
    ax = fig.add_subplot(1, 2, 1)
    labels = [r["label"] for r in rows]
    ax.barh(range(len(rows)), [max(r["seconds"], 1e-4) for r in rows],
            color=[COLORS.get(r["container"], "#333333") for r in rows])
    for i, r in enumerate(rows):
        ax.text(max(r["seconds"], 1e-4), i, f" {r['seconds']:.3f} s", va="center", fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("seconds to remove N/2 expired (log)")
    ax2 = fig.add_subplot(1, 2, 2)
    ys = range(len(rows))
    ax2.barh([y - 0.2 for y in ys], [r["rps_before"] for r in rows], 0.4, label="read-only, before", color="#cccccc")
    ax2.barh([y + 0.2 for y in ys], [r["rps_during"] for r in rows], 0.4, label="during the sweep",
             color=[COLORS.get(r["container"], "#333333") for r in rows])
    ax2.set_yticks(list(ys))
    ax2.set_yticklabels([])
    ax2.set_xlabel("requests per second")
    ax2.legend(fontsize=7)
