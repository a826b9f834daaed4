"""Every Python block in the README, and in the docs pages made from the README's text, runs
as written (each in a fresh interpreter, from the repository root, against the embedded
server it starts itself). A ```py block in a page is a fragment of a larger app and is not
run; a ```python block is a whole program."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the pages moved out of the README (the framework pages have their own tests in tests/web)
PAGES = ("index", "quickstart", "sessions", "web-sessions", "sets", "maps", "analyzer", "lab",
         "reliability", "measured", "development")


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.DOTALL | re.MULTILINE)


BLOCKS = python_blocks(ROOT / "README.md")
PAGE_BLOCKS = [(page, i, block) for page in PAGES
               for i, block in enumerate(python_blocks(ROOT / "docs" / f"{page}.md"))]


def run(block: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", block], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 3  # one short example per kind; the rest lives in docs/


def test_the_docs_pages_keep_the_readmes_former_examples() -> None:
    assert {page for page, _, _ in PAGE_BLOCKS} >= {"quickstart", "sessions", "web-sessions",
                                                     "sets", "maps"}
    assert len(PAGE_BLOCKS) >= 7


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_a_readme_block_runs_as_written(block: str) -> None:
    done = run(block)
    assert done.returncode == 0, f"{block}\n--- stderr:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("block", [b for _, _, b in PAGE_BLOCKS],
                         ids=[f"{page}-block{i}" for page, i, _ in PAGE_BLOCKS])
def test_a_docs_page_block_runs_as_written(block: str) -> None:
    done = run(block)
    assert done.returncode == 0, f"{block}\n--- stderr:\n{done.stderr[-3000:]}"
