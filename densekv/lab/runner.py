"""Runs the selected experiments on each target, shows progress, writes the outputs.

Order of work: check the options and that the report can be drawn (before spending
minutes measuring); then for each target in turn (the user's URL, each --server, or
the embedded default) run every per-server experiment, one at a time, on that target
alone; then the cross-server experiments (the matrix); then results.json, the PNGs and
report.html. Only one server runs at a time, so the machine's cores are not shared
between measurements.

Budgets: in the default run (no --n) each experiment has a time budget (its budget_s);
an experiment that runs out stops *between* configurations, and what it did not
measure is listed in the report as not measured. With an explicit --n there is no
budget: the user asked for that size.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from densekv.lab.experiments import registry
from densekv.lab.experiments.base import Budget, Context, Experiment, Output, Progress
from densekv.lab.results import RunRecord, ServerStamp, build_document, write_results
from densekv.lab.sizing import DEFAULT_N
from densekv.lab.target import LabError, Target, resolve_servers, scratch_target, url_target
from densekv.server.binaries import EMBEDDED, server_binary

MIN_N = 100


@dataclass
class LabConfig:
    url: str | None = None
    servers: tuple[str, ...] = ()
    n: int | None = None  # None: DEFAULT_N, with per-experiment budgets
    only: tuple[str, ...] | None = None
    out: Path = Path("densekv-lab")
    allow_config: bool = False
    command: str = "densekv lab"
    #: per-kind experiment knobs, e.g. {"sessions": {"layouts": ("dense",)}} (tests)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.n if self.n is not None else DEFAULT_N


@dataclass
class LabRun:
    doc: dict[str, Any]
    outputs: list[Output]
    paths: dict[str, Path]
    seconds: float

    @property
    def failed(self) -> list[Output]:
        return [o for o in self.outputs if o.status == "failed"]


def select(only: tuple[str, ...] | None) -> list[Experiment]:
    experiments = registry()
    if not only:
        return list(experiments.values())
    unknown = [k for k in only if k not in experiments]
    if unknown:
        raise LabError(f"unknown experiment {unknown[0]!r}: choose from {', '.join(experiments)}")
    return [e for k, e in experiments.items() if k in only]


def check(config: LabConfig) -> list[Experiment]:
    if config.url and config.servers:
        raise LabError("give --url or --server, not both")
    if config.n is not None and config.n < MIN_N:
        raise LabError(f"--n is at least {MIN_N}")
    chosen = select(config.only)
    from densekv.lab.report import require_matplotlib

    require_matplotlib()
    return chosen


@contextlib.contextmanager
def targets(config: LabConfig) -> Iterator[Iterator[contextlib.AbstractContextManager[Target]]]:
    if config.url:
        yield iter([url_target(config.url, allow_config=config.allow_config)])
    else:
        binaries = resolve_servers(config.servers) if config.servers else [server_binary(EMBEDDED)]
        yield (scratch_target(b) for b in binaries)


def run_lab(config: LabConfig, display: Display | None = None) -> LabRun:
    """Run the lab as configured; write results.json, the PNGs and report.html."""
    chosen = check(config)
    display = display or Display()
    started = time.monotonic()
    outputs: list[Output] = []
    stamps: list[ServerStamp] = []
    per_server = [e for e in chosen if e.per_server and e.available]
    for exp in chosen:
        if not exp.available:
            outputs.append(Output(exp.kind, None, status="not available", reason=exp.reason))
    count = 1 if config.url else len(resolve_servers(config.servers)) if config.servers else 1
    with contextlib.ExitStack() as stack, targets(config) as opened:
        for opening in opened:
            with opening as target:  # a refused URL fails here, before any display
                if not stamps:
                    stack.enter_context(display.running(count * len(per_server)))
                stamps.append(target.stamp)
                for exp in per_server:
                    outputs.append(run_one(exp, target, config, display))
    for exp in chosen:
        if exp.available and not exp.per_server:
            outputs.append(exp.combine([o for o in outputs if o.status == "ran"]))
    order = {e.kind: i for i, e in enumerate(chosen)}
    outputs.sort(key=lambda o: order.get(o.kind, len(order)))  # report order, servers in turn
    doc = build_document(
        command=config.command, n=config.size, servers=stamps,
        experiments=[summary(o, chosen) for o in outputs],
        runs=[r for o in outputs for r in o.records],
    )
    paths = {"results": write_results(doc, config.out)}
    from densekv.lab.report import write_report

    paths.update(write_report(doc, outputs, chosen, config.out))
    return LabRun(doc, outputs, paths, time.monotonic() - started)


def run_one(exp: Experiment, target: Target, config: LabConfig, display: Display) -> Output:
    budget = Budget(exp.budget_s if config.n is None else None)
    ctx = Context(target, config.size, display, budget, dict(config.options.get(exp.kind, {})))
    t0 = time.monotonic()
    try:
        out = exp.run(ctx)
    except Exception as exc:  # one experiment's failure is reported, the rest still run
        if os.environ.get("DENSEKV_DEBUG"):
            raise
        out = Output(exp.kind, target.name, status="failed", reason=f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(Exception):
            target.clear()
    out.seconds = round(time.monotonic() - t0, 2)
    display.finished(out)
    return out


def summary(out: Output, chosen: list[Experiment]) -> dict[str, Any]:
    exp = next((e for e in chosen if e.kind == out.kind), None)
    return {
        "kind": out.kind,
        "title": exp.title if exp else out.kind,
        "seed": exp.seed if exp else None,
        "status": out.status,
        "reason": out.reason,
        "server": out.server,
        "seconds": out.seconds,
        "notes": out.notes,
    }


# -- the live display ----------------------------------------------------------------------


class Display(Progress):
    """No output (tests, --json). Subclassed by LiveDisplay for the terminal."""

    @contextlib.contextmanager
    def running(self, experiments: int) -> Iterator[None]:
        yield

    def finished(self, out: Output) -> None:
        pass


class LiveDisplay(Display):
    """Rich progress bars (overall and current experiment) above a live table of the
    configurations measured so far; written to stderr so stdout stays clean."""

    ROWS = 14

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.rows: list[RunRecord] = []
        self._live: Any = None
        self._progress: Any = None
        self._task: Any = None
        self._overall: Any = None

    @contextlib.contextmanager
    def running(self, experiments: int) -> Iterator[None]:
        from rich.live import Live
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bars

        self._progress = Bars(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), console=self.console)
        self._overall = self._progress.add_task("experiments", total=experiments)
        with Live(self._render(), console=self.console, refresh_per_second=4, transient=False) as live:
            self._live = live
            yield
            live.update(self._render())
        self._live = None

    def _render(self) -> Any:
        from rich.console import Group
        from rich.table import Table

        table = Table(title="measured so far", expand=False)
        for col in ("server", "kind", "configuration", "P", "n", "B/item", "ops/s", "µs/op"):
            table.add_column(col, justify="right" if col in ("P", "n", "B/item", "ops/s", "µs/op") else "left",
                             no_wrap=True)
        for r in self.rows[-self.ROWS:]:
            table.add_row(r.server, r.kind, r.variant or r.layout, "-" if r.partitions is None else f"{r.partitions:,}",
                          f"{r.n:,}", _fmt(r.bytes_per_item), _fmt(r.ops_per_s, 0), _fmt(r.server_usec_per_call))
        parts: list[Any] = [self._progress] if self._progress is not None else []
        return Group(*parts, table)

    def start(self, description: str, total: float) -> None:
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(description, total=total)

    def advance(self, amount: float = 1.0) -> None:
        if self._task is not None:
            self._progress.advance(self._task, amount)

    def record(self, record: RunRecord) -> None:
        self.rows.append(record)
        if self._live is not None:
            self._live.update(self._render())

    def finished(self, out: Output) -> None:
        if self._progress is not None:
            self._progress.advance(self._overall, 1)
        if out.status != "ran":
            self.console.print(f"[yellow]{out.kind} on {out.server}: {out.status}[/] {out.reason}")


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"
