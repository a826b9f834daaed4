"""What an experiment is to the lab: a plug-in that measures and says how.

An experiment is one module under densekv/lab/experiments/ with one `Experiment`
subclass, listed in the registry (experiments/__init__.py). The runner hands it a
`Context` per server; it returns an `Output`: result records (results.json), figures
(drawn only when the report is written, so matplotlib stays an optional import), tables,
and the sentences that say how it was measured. An experiment that spans servers (the
matrix) sets `per_server = False` and gets every other experiment's outputs instead.
Experiments do not print; they report progress through the context.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from densekv.lab.results import RunRecord
from densekv.lab.target import LabError, Target


@dataclass
class FigureSpec:
    """A figure: `draw(fig)` fills a matplotlib Figure; the caption says what it shows."""

    name: str  # file stem, unique within the experiment and server
    title: str
    caption: str
    draw: Callable[[Any], None]


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
    """A soft time limit: experiments check it between configurations, never mid-curve."""

    seconds: float | None
    started: float = field(default_factory=time.monotonic)

    def exceeded(self) -> bool:
        return self.seconds is not None and time.monotonic() - self.started > self.seconds

    def left(self) -> float | None:
        return None if self.seconds is None else self.seconds - (time.monotonic() - self.started)


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
    #: seconds of the default lab (valkey-9.1, 2 cores) this experiment may take; scaled
    #: by n / DEFAULT_N. Only the default run is held to it (see runner.py).
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


class NotReplayable(LabError):
    """A result record whose load cannot be run again from the record alone."""


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
