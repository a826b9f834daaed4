"""Runs the selected experiments on each target, shows progress, writes the outputs.

Order of work: check the options and that the report can be drawn (before spending
minutes measuring); then for each target in turn (the user's URL, each --server, or
the embedded default, or with --cluster one cluster of that binary) run every
per-server experiment, one at a time, on that target alone (on a cluster, those that set
`not_on_cluster` are reported skipped with their reason, and each record gets its
per-master bytes: densekv/tools/lab/cluster_target.py); then the cross-server experiments (the
matrix); then results.json, the PNGs and report.html. Only one server runs at a time, so the machine's cores are not shared
between measurements.

Budgets: in the default run (no --n) each experiment has a time budget (its budget_s,
less what the experiments before it on that server overran, down to half of it). Before
it starts, the runner measures the machine's pace (densekv/tools/lab/pace.py) and the
experiment fits its sizing to budget and pace - N, checkpoints, repetitions; never
which configurations, so a busy machine measures the same story as an idle one. From
the second experiment on, the pace is the geometric mean of the probe's and of how much
slower than predicted the experiment before it ran (its own work, over tens of seconds:
a probe of a fraction of a second can fall into a quiet or a busy moment). With an
explicit --n there is no budget: the user asked for that size.

Ctrl-C: the experiment running stops where it is; its records measured so far (each
one passed to the display as it was measured) go into a partial results.json and
report.html, the targets are cleaned on the way out (a scratch server is stopped, a
--url database flushed), and the run ends with `interrupted` set.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from densekv.errors import LabError
from densekv.tools.lab.experiments import registry
from densekv.tools.lab.experiments.base import Budget, Context, Experiment, Output, Progress
from densekv.tools.lab.results import RunRecord, ServerStamp, build_document, write_results
from densekv.tools.lab.sizing import DEFAULT_N
from densekv.tools.lab.target import Target, resolve_servers, scratch_target, url_target
from densekv.tools.server.binaries import EMBEDDED, server_binary

MIN_N = 100
#: an experiment's budget shrinks by what the ones before it overran, at most to this share
MIN_BUDGET_SHARE = 0.5


@dataclass
class LabConfig:
    url: str | None = None
    servers: tuple[str, ...] = ()
    n: int | None = None  # None: DEFAULT_N, with per-experiment budgets
    only: tuple[str, ...] | None = None
    out: Path = Path("densekv-lab")
    allow_config: bool = False
    cluster: bool = False  # measure on a 3-master + 3-replica cluster the lab starts
    command: str = "densekv lab"
    #: per-kind experiment knobs, e.g. {"sessions": {"layouts": ("dense",)}} (tests)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: tests: the pace to use instead of measuring it (default run only)
    pace: float | None = None

    @property
    def size(self) -> int:
        return self.n if self.n is not None else DEFAULT_N


@dataclass
class LabRun:
    doc: dict[str, Any]
    outputs: list[Output]
    paths: dict[str, Path]
    seconds: float
    interrupted: bool = False
    cleaned: list[str] = field(default_factory=list)  # earlier runs' leftovers removed

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
    if config.cluster and config.url:
        raise LabError("--cluster starts a cluster of its own: give --cluster or --url, not both")
    if config.cluster and len(resolve_servers(config.servers)) > 1:
        raise LabError("--cluster takes one --server: the binary every node of the cluster runs")
    if config.n is not None and config.n < MIN_N:
        raise LabError(f"--n is at least {MIN_N}")
    chosen = select(config.only)
    from densekv.tools.lab.report import require_matplotlib

    require_matplotlib()
    return chosen


@contextlib.contextmanager
def targets(config: LabConfig) -> Iterator[Iterator[contextlib.AbstractContextManager[Target]]]:
    if config.url:
        yield iter([url_target(config.url, allow_config=config.allow_config)])
    elif config.cluster:
        from densekv.tools.lab.cluster_target import cluster_target

        binary = resolve_servers(config.servers)[0] if config.servers else server_binary(EMBEDDED)
        yield iter([cluster_target(binary)])
    else:
        binaries = resolve_servers(config.servers) if config.servers else [server_binary(EMBEDDED)]
        yield (scratch_target(b) for b in binaries)


class Recorder(Progress):
    """Passes progress on to the display and keeps the records of the experiment that
    is running, so an interrupted run can report them."""

    def __init__(self, display: Progress) -> None:
        self.display = display
        self.records: list[RunRecord] = []
        self.target: Target | None = None  # on a cluster: each record gets its per-master split

    def start(self, description: str, total: float) -> None:
        self.display.start(description, total)

    def advance(self, amount: float = 1.0) -> None:
        self.display.advance(amount)

    def record(self, record: RunRecord) -> None:
        if self.target is not None and self.target.is_cluster:
            from densekv.tools.lab.cluster_target import split_of

            split = split_of(self.target, record)
            if split is not None:
                record.params["cluster"] = split
        self.records.append(record)
        self.display.record(record)


def run_lab(config: LabConfig, display: Display | None = None) -> LabRun:
    """Run the lab as configured; write results.json, the PNGs and report.html (a
    partial one, with `interrupted` set, after Ctrl-C)."""
    chosen = check(config)
    display = display or Display()
    started = time.monotonic()
    outputs: list[Output] = []
    stamps: list[ServerStamp] = []
    cleaned: list[str] = []
    per_server = [e for e in chosen if e.per_server and e.available]
    for exp in chosen:
        if not exp.available:
            outputs.append(Output(exp.kind, None, status="not available", reason=exp.reason))
    count = 1 if config.url or config.cluster else len(resolve_servers(config.servers)) if config.servers else 1
    recorder = Recorder(display)
    current: tuple[Experiment, str] | None = None
    interrupted = False
    try:
        with contextlib.ExitStack() as stack, targets(config) as opened:
            for opening in opened:
                with opening as target:  # a refused URL fails here, before any display
                    if not stamps:
                        stack.enter_context(display.running(count * len(per_server)))
                    if target.cleaned:
                        cleaned.append(target.cleaned)
                        display.notice(target.cleaned)
                    stamps.append(target.stamp)
                    overrun, observed = 0.0, None
                    recorder.target = target
                    for exp in per_server:
                        if target.is_cluster and exp.not_on_cluster:
                            outputs.append(skip_on_cluster(exp, target, display))
                            continue
                        current, recorder.records = (exp, target.name), []
                        out = run_one(exp, target, config, recorder, overrun, observed)
                        current = None
                        if target.is_cluster:
                            from densekv.tools.lab.cluster_target import describe

                            describe(out, target)
                        outputs.append(out)
                        if out.seconds is not None and config.n is None:
                            overrun = max(0.0, overrun + out.seconds - exp.budget_s)
                            observed = observed_pace(out) or observed
    except KeyboardInterrupt:
        interrupted = True
        if current is not None:
            exp, server = current
            outputs.append(Output(exp.kind, server, status="interrupted", records=list(recorder.records),
                                  reason=f"interrupted (Ctrl-C) after {len(recorder.records)} configurations"))
        done = {(o.kind, o.server) for o in outputs}
        for stamp in stamps:
            for exp in per_server:
                if (exp.kind, stamp.name) not in done:
                    outputs.append(Output(exp.kind, stamp.name, status="skipped",
                                          reason="not run: the lab was interrupted (Ctrl-C) before it"))
    for exp in chosen:
        if exp.available and not exp.per_server and config.cluster and exp.not_on_cluster:
            from densekv.tools.lab.cluster_target import skipped

            outputs.append(skipped(exp.kind, None, exp.not_on_cluster))
        elif exp.available and not exp.per_server:
            outputs.append(exp.combine([o for o in outputs if o.status in ("ran", "interrupted")]))
    order = {e.kind: i for i, e in enumerate(chosen)}
    outputs.sort(key=lambda o: order.get(o.kind, len(order)))  # report order, servers in turn
    doc = build_document(
        command=config.command, n=config.size, servers=stamps,
        experiments=[summary(o, chosen) for o in outputs],
        runs=[r for o in outputs for r in o.records], interrupted=interrupted,
    )
    paths = {"results": write_results(doc, config.out)}
    from densekv.tools.lab.report import write_report

    paths.update(write_report(doc, outputs, chosen, config.out, cleaned=cleaned))
    return LabRun(doc, outputs, paths, time.monotonic() - started, interrupted, cleaned)


def skip_on_cluster(exp: Experiment, target: Target, display: Display) -> Output:
    from densekv.tools.lab.cluster_target import skipped

    out = skipped(exp.kind, target.name, exp.not_on_cluster)
    display.finished(out)
    return out


def observed_pace(out: Output) -> float | None:
    """How much slower than the reference machine an experiment actually ran: its
    seconds / its sizing's reference cost (None if it predicted nothing)."""
    if not out.seconds or not out.predicted or not out.pace or out.status != "ran":
        return None
    return out.seconds / (out.predicted / out.pace)


def run_one(exp: Experiment, target: Target, config: LabConfig, progress: Progress,
            overrun: float = 0.0, observed: float | None = None) -> Output:
    """One experiment on one target; its failure is reported, the rest still run."""
    budget = Budget(None)
    pace = None
    if config.n is None:
        from densekv.tools.lab.pace import measure_pace

        pace = config.pace if config.pace is not None else measure_pace(target.client)
        if observed is not None and config.pace is None:
            pace = round((pace * observed) ** 0.5, 2)
        budget = Budget(max(MIN_BUDGET_SHARE * exp.budget_s, exp.budget_s - overrun), pace)
    ctx = Context(target, config.size, progress, budget, dict(config.options.get(exp.kind, {})))
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
    out.pace, out.predicted = pace, budget.predicted
    display = progress.display if isinstance(progress, Recorder) else progress
    if isinstance(display, Display):
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
        "trimmed": out.trimmed,
        "pace": out.pace,
    }


# -- the live display ----------------------------------------------------------------------

COLUMNS = ("server", "kind", "configuration", "P", "n", "B/item", "ops/s", "µs/op")


def table_row(r: RunRecord) -> list[str]:
    name, n, per_item = r.variant or r.layout, r.n, r.bytes_per_item
    shown = r.params.get("shown")  # the labelled point the summary also quotes (small_sets: at the limit)
    if shown:
        name, n, per_item = f"{name} {shown['label']}", int(shown["n"]), shown["bytes_per_item"]
    return [r.server, r.kind, name, "-" if r.partitions is None else f"{r.partitions:,}",
            f"{n:,}", _fmt(per_item), _fmt(r.ops_per_s, 0), _fmt(r.server_usec_per_call)]


def plain_table(rows: list[list[str]], columns: tuple[str, ...] = COLUMNS) -> str:
    """Rows as plain text columns, nothing cut (for a pipe or a log file)."""
    widths = [max([len(c)] + [len(row[i]) for row in rows]) for i, c in enumerate(columns)]
    left = {0, 1, 2}

    def line(cells: list[str] | tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(columns)] + [line(row) for row in rows]).rstrip()


class Display(Progress):
    """No output (tests, --json). Subclassed by LiveDisplay for the terminal."""

    @contextlib.contextmanager
    def running(self, experiments: int) -> Iterator[None]:
        yield

    def finished(self, out: Output) -> None:
        pass

    def notice(self, text: str) -> None:
        pass


class LiveDisplay(Display):
    """On a terminal: rich progress bars (overall and current experiment) above a live
    table of the configurations measured so far. Piped or redirected: one line per
    experiment as it ends, then every configuration in plain columns, nothing cut.
    Written to stderr so stdout stays clean."""

    ROWS = 14

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.rows: list[RunRecord] = []
        self._live: Any = None
        self._progress: Any = None
        self._task: Any = None
        self._overall: Any = None

    @contextlib.contextmanager
    def running(self, experiments: int) -> Iterator[None]:
        if not self.live:
            yield  # after Ctrl-C the one line the CLI prints is all: the table is in the report
            if self.rows:
                self.console.file.write(plain_table([table_row(r) for r in self.rows]) + "\n")
            return
        from rich.live import Live
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bars

        self._progress = Bars(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), console=self.console)
        self._overall = self._progress.add_task("experiments", total=experiments)
        with Live(self._render(), console=self.console, refresh_per_second=4, transient=False) as live:
            self._live = live
            try:
                yield
            finally:
                live.update(self._render())
        self._live = None

    def _render(self) -> Any:
        from rich.console import Group
        from rich.table import Table

        table = Table(title="measured so far", expand=False)
        for i, col in enumerate(COLUMNS):
            table.add_column(col, justify="left" if i < 3 else "right", no_wrap=True)
        for r in self.rows[-self.ROWS:]:
            table.add_row(*table_row(r))
        parts: list[Any] = [self._progress] if self._progress is not None else []
        return Group(*parts, table)

    def start(self, description: str, total: float) -> None:
        if self._progress is None:
            return
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

    def notice(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def finished(self, out: Output) -> None:
        if self._progress is not None:
            self._progress.advance(self._overall, 1)
        if out.status != "ran":
            self.console.print(f"[yellow]{out.kind} on {out.server}: {out.status}[/] {out.reason}", soft_wrap=True)
        elif not self.live:
            sized = f"; sized for this machine: {out.trimmed}" if out.trimmed else ""
            self.console.print(f"{out.kind} on {out.server}: {len(out.records)} configurations in "
                               f"{out.seconds or 0:.0f} s{sized}", markup=False, highlight=False, soft_wrap=True)


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"
