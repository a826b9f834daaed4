"""The experiment registry: one module per experiment, in the order the report shows them.

To add one: write densekv/lab/experiments/NAME.py with a module-level `EXPERIMENT`
(an `Experiment` subclass instance, see base.py) and list the module here. `kind` is
what `--only` takes.
"""

from __future__ import annotations

from importlib import import_module

from densekv.lab.experiments.base import Experiment

MODULES = ("sessions", "sets", "small_sets", "maps", "matrix")


def registry() -> dict[str, Experiment]:
    """kind -> experiment, in report order."""
    out: dict[str, Experiment] = {}
    for name in MODULES:
        exp: Experiment = import_module(f"densekv.lab.experiments.{name}").EXPERIMENT
        out[exp.kind] = exp
    return out
