"""How a benchmark hands out a record: one JSON line on stdout, and the same line appended
to its results file (benchmarks/results/*.jsonl) unless it was asked not to save."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(record: dict[str, Any], out: Path | str | None) -> None:
    """Print `record` as one JSON line; append it to `out` too (None: print only)."""
    line = json.dumps(record)
    print(line, flush=True)
    if out is not None:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(line + "\n")
