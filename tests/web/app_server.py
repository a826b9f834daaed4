"""Waiting for a real app server (gunicorn, uvicorn) that a web test started: until its
`/noop` route answers 200, or an AssertionError carrying the end of the server's log when
it exits or does not answer within `seconds` (a busy machine starts workers slowly)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def wait_serving(base: str, proc: subprocess.Popen[bytes], log: Path | None = None,
                 seconds: float = 30.0) -> None:
    def tail() -> str:
        if log is not None:
            return log.read_text(errors="replace")[-3000:]
        return proc.stderr.read().decode(errors="replace")[-3000:] if proc.stderr is not None else ""

    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, f"the app server exited: {tail()}"
        try:
            if httpx.get(f"{base}/noop", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"the app server did not answer within {seconds:.0f} s: {tail()}"
        time.sleep(0.1)
