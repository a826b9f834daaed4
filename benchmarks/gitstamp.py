"""The commit a benchmark record was measured at, honestly: "<short sha>" for a clean
tree, "<short sha>+dirty" when the code differs from it (densekv/, the benchmark scripts,
pyproject.toml: the record then came from code that no commit holds; docs and result
files do not count). Every benchmark stamps its records with commit()."""

from __future__ import annotations

import subprocess
from pathlib import Path

CODE = (":/densekv", ":/benchmarks/*.py", ":/pyproject.toml")  # from the top, whatever the cwd


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=False,
                              cwd=Path(__file__).parent).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no", "--", *CODE) else "")
