"""How the lab's experiment figures finish an axis, written once: the log x scale, labels,
title, grid and legend that the sessions, sets and small-sets figures all use (matplotlib
Axes in; the caller imports matplotlib)."""

from __future__ import annotations

from typing import Any


def legend_outside(ax: Any) -> None:
    """The legend to the right of the axes (the caller leaves room with layout="constrained")."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


def log_axes(ax: Any, xlabel: str, ylabel: str | None = None, *, title: str | None = None,
             yscale: str | None = None, legend: str | None = "outside") -> None:
    """Log x scale (and `yscale` if given), labels, a title at fontsize 9, the grid of both
    tick kinds, and the legend: "outside" (legend_outside), "inside" (fontsize 8) or None."""
    ax.set_xscale("log")
    if yscale is not None:
        ax.set_yscale(yscale)
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    if legend == "outside":
        legend_outside(ax)
    elif legend == "inside":
        ax.legend(fontsize=8)
