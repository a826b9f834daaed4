"""Every Python block in the README runs as written (each in a fresh interpreter, from the
repository root, against the embedded server it starts itself)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 7


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_a_readme_block_runs_as_written(block: str) -> None:
    done = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", block], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{block}\n--- stderr:\n{done.stderr[-3000:]}"
