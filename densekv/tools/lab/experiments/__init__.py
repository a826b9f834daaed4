"""The experiment registry: one module per experiment, in the order the report shows them.

To add one: write densekv/tools/lab/experiments/NAME.py with a module-level `EXPERIMENT`
(an `Experiment` subclass instance, see base.py) and list the module here. `kind` is
what `--only` takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from densekv.errors import NotReplayable
from densekv.tools.lab.experiments.base import Experiment, Replay

MODULES = ("sessions", "sets", "small_sets", "maps", "containers", "matrix")


def registry() -> dict[str, Experiment]:
    """kind -> experiment, in report order."""
    out: dict[str, Experiment] = {}
    for name in MODULES:
        exp: Experiment = import_module(f"densekv.tools.lab.experiments.{name}").EXPERIMENT
        out[exp.kind] = exp
    return out


def replay_of(record: Mapping[str, Any]) -> Replay:
    """How to load a result record's items again on another server (its experiment
    module's `replay`); NotReplayable if its experiment has none or the record lacks what
    the load needs."""
    kind = str(record.get("kind"))
    module = import_module(f"densekv.tools.lab.experiments.{kind}") if kind in MODULES else None
    replay = getattr(module, "replay", None)
    if replay is None:
        raise NotReplayable(f"no replay for {kind!r} records")
    result: Replay = replay(record)
    return result
