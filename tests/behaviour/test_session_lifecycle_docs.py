"""docs/session-lifecycle.md's Python blocks run as written, in order, on each server of
the matrix (with `client` as the page says), so the page cannot drift from the API."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

PAGE = Path(__file__).parents[2] / "docs" / "session-lifecycle.md"


def test_the_page_runs_as_written(client: Any) -> None:
    for ns in ("app", "shop", "accounts", "bank"):
        keys = list(client.scan_iter(match=f"{ns}:*"))
        if keys:
            client.delete(*keys)
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)
    assert len(blocks) >= 4
    scope: dict[str, Any] = {"client": client}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), scope)  # noqa: S102 - the page's own code
    assert "Firefox on Android" in out.getvalue()
