"""The maps experiment's figures, drawn by the report on a matplotlib Figure: bytes per item
by case and configuration, and get/set throughput with the server's time per operation."""

from __future__ import annotations

from typing import Any

from densekv.tools.lab.experiments.maps_cases import CASES, PLAN, Result

COLORS = {"plain": "#d62728", "plain zipped": "#ff7f0e", "map int": "#2ca02c", "map raw": "#2ca02c",
          "map msgpack": "#8c564b", "map zlib": "#1f77b4", "map lz4": "#9467bd", "map zstd+dict": "#17becf",
          "map zstd": "#7f7f7f"}


def plot_bytes(fig: Any, results: list[Result]) -> None:
    cases = list(dict.fromkeys(r.config.case for r in results))
    for i, case in enumerate(cases):
        ax = fig.add_subplot(1, len(cases), i + 1)
        mine = [r for r in results if r.config.case == case and r.point is not None]
        base = next((r.point.bytes_per_item for r in mine if r.config.layout == "plain"), None)  # type: ignore[union-attr]
        ys = [r.point.bytes_per_item for r in mine]  # type: ignore[union-attr]
        xs = list(range(len(mine)))
        ax.bar(xs, ys, color=[COLORS.get(r.config.short, "#333333") for r in mine])
        for x, y in zip(xs, ys):
            label = f"{y:.0f}" + (f"\n{base / y:.1f}x" if base and y > 0 and base != y else "")
            ax.text(x, y, label, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(xs)
        ax.set_xticklabels([r.config.short for r in mine], rotation=60, ha="right", fontsize=8)
        ax.set_title(f"{case} (n={mine[0].n:,})" if mine else case, fontsize=8)
        ax.set_ylim(0, max(ys, default=1) * 1.25)
        ax.tick_params(axis="y", labelsize=7)
        if i == 0:
            ax.set_ylabel("bytes per item (used_memory delta / items)")
        ax.grid(True, axis="y", alpha=0.3)


def by_case(results: list[Result]) -> list[Result]:
    """Results grouped by case (CASES order), PLAN order within a case."""
    order = {c: i for i, c in enumerate(PLAN)}
    cases = list(CASES)
    return sorted(results, key=lambda r: (cases.index(r.config.case), order.get(r.config, len(order))))


def plot_ops(fig: Any, results: list[Result]) -> None:
    from matplotlib.transforms import blended_transform_factory

    ordered = by_case(results)
    xs: list[float] = []
    x, last = 0.0, None
    for r in ordered:
        if last is not None and r.config.case != last:
            x += 0.8  # a gap between cases
        xs.append(x)
        last = r.config.case
        x += 1
    rate_ax, usec_ax = fig.subplots(2, 1, sharex=True)
    for ax, key, unit in ((rate_ax, "ops_per_s", "operations/s (one client)"),
                          (usec_ax, "server_usec_per_call", "server µs per operation")):
        for dx, op, color in ((-0.2, "get", "#2ca02c"), (0.2, "set", "#1f77b4")):
            ys = [r.ops[op].get(key) or 0 for r in ordered]
            ax.bar([v + dx for v in xs], ys, 0.4, label=op, color=color)
        ax.set_ylabel(unit, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.tick_params(axis="y", labelsize=8)
        trans = blended_transform_factory(ax.transData, ax.transAxes)
        cases = list(dict.fromkeys(r.config.case for r in ordered))
        for i, case in enumerate(cases):
            group = [v for v, r in zip(xs, ordered) if r.config.case == case]
            if ax is rate_ax:
                ax.text(sum(group) / len(group), 1.02, case, ha="center", va="bottom", fontsize=9,
                        fontweight="bold", transform=trans)
            if i < len(cases) - 1:
                ax.axvline(group[-1] + 0.9, color="#999999", linewidth=0.6)
    rate_ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    usec_ax.set_xticks(xs)
    usec_ax.set_xticklabels([r.config.short for r in ordered], rotation=60, ha="right", fontsize=8)
