"""What an experiment is to the lab: a plug-in that measures and says how.

An experiment is one module under densekv/tools/lab/experiments/ with one `Experiment`
subclass, listed in the registry (experiments/__init__.py). The runner hands it a
`Context` per server; it returns an `Output`: result records (results.json), figures
(drawn only when the report is written, so matplotlib stays an optional import), tables,
and the sentences that say how it was measured. An experiment that spans servers (the
matrix) sets `per_server = False` and gets every other experiment's outputs instead.
Experiments do not print; they report progress through the context.

Conventions every experiment keeps (the report and the budgets rely on them):
  * The story set: whatever configurations the experiment's seed story compares are
    measured in every run. In the default run the experiment sizes its work to its
    budget before it starts (`ctx.budget.fit`: N, checkpoints, repetitions, from its
    cost on the reference machine x the pace) and never drops a configuration when time
    runs short; it sets `Output.trimmed` to what the chosen sizing gave up.
  * Notes: at most one sentence per output, for what could not be measured here and
    why (the server lacks a feature, a package is missing); facts about the method go
    into `method`.
  * Every record is passed to `ctx.progress.record` as soon as it is measured: an
    interrupted run (Ctrl-C) reports what was measured from those.
  * Keys: only on the target's client, never outside the database it names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from densekv.tools.lab.results import RunRecord
from densekv.tools.lab.sizing import Sizing, fit
from densekv.tools.lab.target import Target


@dataclass
class FigureSpec:
    """A figure: `draw(fig)` fills a matplotlib Figure; the caption says what it shows."""

    name: str  # file stem, unique within the experiment and server
    title: str
    caption: str
    draw: Callable[[Any], None]
    size: tuple[float, float] = (10.0, 5.0)  # inches, at 100 dpi


@dataclass
class TableSpec:
    title: str
    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""


@dataclass
class Output:
    kind: str
    server: str | None
    status: str = "ran"  # ran | not available | failed | skipped
    reason: str = ""
    records: list[RunRecord] = field(default_factory=list)
    figures: list[FigureSpec] = field(default_factory=list)
    tables: list[TableSpec] = field(default_factory=list)
    method: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float | None = None
    trimmed: str = ""  # what the budget's sizing gave up ("": the full sizing)
    pace: float | None = None  # the machine's pace when it started (default run)
    predicted: float | None = None  # seconds its sizing was predicted to take (default run)

    def trim(self, trimmed: str) -> None:
        """Say what the budget's sizing gave up ("": the full sizing)."""
        self.trimmed = trimmed

    def add_method(self, lines: Iterable[str]) -> None:
        """Paragraphs of the report's method section, after those already there."""
        self.method += lines

    def add_notes(self, lines: Iterable[str]) -> None:
        """Notes of the report, after those already there."""
        self.notes += lines


class Progress:
    """The runner's view of an experiment's progress (a no-op by default)."""

    def start(self, description: str, total: float) -> None:
        pass

    def advance(self, amount: float = 1.0) -> None:
        pass

    def record(self, record: RunRecord) -> None:
        pass


@dataclass
class Budget:
    """The default run's time for one experiment, and the machine's pace when it started.

    `fit` picks the experiment's sizing before it measures anything (see sizing.py);
    `exceeded`/`left` are what is left of the seconds as it runs. With an explicit --n
    there is no budget (seconds None): `fit` returns the full sizing."""

    seconds: float | None
    pace: float = 1.0
    started: float = field(default_factory=time.monotonic)
    predicted: float | None = None  # seconds the chosen sizing should take here

    def exceeded(self) -> bool:
        return self.seconds is not None and time.monotonic() - self.started > self.seconds

    def left(self) -> float | None:
        return None if self.seconds is None else self.seconds - (time.monotonic() - self.started)

    def fit(self, sizings: list[Sizing], cost: Callable[[Sizing], float]) -> Sizing:
        """The largest sizing whose reference cost x pace fits the seconds left."""
        chosen, self.predicted = fit(sizings, cost, self.left(), self.pace)
        return chosen


@dataclass
class Context:
    target: Target
    n: int
    progress: Progress = field(default_factory=Progress)
    budget: Budget = field(default_factory=lambda: Budget(None))
    options: dict[str, Any] = field(default_factory=dict)  # experiment knobs (tests)


class Experiment:
    kind: str = ""
    title: str = ""
    seed: str | None = None  # the seed document it reproduces
    available: bool = True
    reason: str = ""  # why not available
    per_server: bool = True
    #: why it does not run on a cluster (`densekv lab --cluster` reports it skipped with
    #: this reason); "" if it does
    not_on_cluster: str = ""
    #: seconds of the default lab this experiment may take (its sizing is fitted to them
    #: at the machine's pace); an explicit --n has no budget (see runner.py)
    budget_s: float = 60.0

    def run(self, ctx: Context) -> Output:
        raise NotImplementedError

    def combine(self, outputs: list[Output]) -> Output:
        raise NotImplementedError


class Unavailable(Experiment):
    """A registry entry for an experiment this build cannot run yet. It reports exactly
    that, with no figures and no records."""

    def __init__(self, kind: str, title: str, seed: str, reason: str) -> None:
        self.kind, self.title, self.seed, self.reason = kind, title, seed, reason
        self.available = False

    def run(self, ctx: Context) -> Output:
        return Output(self.kind, ctx.target.name, status="not available", reason=self.reason)


# -- replaying a record elsewhere (benchmarks/lab_check.py) ---------------------------------


def _nothing(client: Any) -> None:
    pass


@dataclass
class Replay:
    """A record's load, to run again on another server: benchmarks/lab_check.py checks
    the lab's bytes per item against a plain used_memory delta on a fresh server this way.

    `warm_up(client)` does what the lab did before the record's baseline that is not the
    record's data (scripts loaded, the Lua heap grown: the server's one-time costs);
    `load(client)` stores exactly the record's `items` through the same densekv calls,
    generators and seeds as the lab; `settings` are the CONFIG values the record was
    measured with (start options for the fresh server). Neither flushes nor measures,
    and the caller closes the connections."""

    items: int
    load: Callable[[Any], None]
    warm_up: Callable[[Any], None] = _nothing
    settings: dict[str, str] = field(default_factory=dict)
    note: str = ""  # what the replay does differently from the lab, if anything


def record_settings(record: Mapping[str, Any]) -> dict[str, str]:
    """The record's listpack limits as CONFIG names and values (those it knows)."""
    return {k.replace("_", "-"): str(v) for k, v in (record.get("config") or {}).items() if v is not None}
