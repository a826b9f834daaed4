"""The planner's one error: a plan that cannot be made as asked (bad input, no layout)."""

from __future__ import annotations

from densekv.errors import DensekvError


class PlannerError(DensekvError):
    """`plan()` cannot recommend anything for this input; the message says why."""
