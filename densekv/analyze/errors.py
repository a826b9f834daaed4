"""The analyzer's one error type: a problem the user can act on, said in one line."""

from __future__ import annotations

from densekv.errors import DensekvError


class AnalyzeError(DensekvError):
    """The analysis cannot run or go on as asked (the message says why and what to do)."""
