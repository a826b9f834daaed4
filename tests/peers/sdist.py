"""The peers' own test suites, fetched from their sdists on PyPI (never copied here; Quart's
and Litestar's sdists ship no tests, so theirs are vendored unchanged under
tests/peers/vendored/, each with a README naming its commit and a checked SHA256SUMS).

`source(dist)` downloads the sdist of the version of `dist` installed in this environment
(so the tests match the code they exercise) with pip, unpacks it once under
`.cache/sdists/<name>-<version>/` and returns that directory. A machine that cannot reach
the package index skips the peer suites (pytest.skip names what was missing) rather than
failing them; CI reaches it. Each tests/peers/test_<framework>_suite.py runs a peer's tests
twice in a subprocess: once on the framework's own backend (the control) and once with
densekv's, and compares the two.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "sdists"


def installed(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        pytest.skip(f"{dist} is not installed (pip install -e '.[test]')")


def source(dist: str, ver: str | None = None) -> Path:
    """The unpacked sdist of `dist` at `ver` (default: the installed version)."""
    ver = ver or installed(dist)
    CACHE.mkdir(parents=True, exist_ok=True)
    lock = CACHE / f".{dist}-{ver}.lock"
    import fcntl  # xdist workers may ask for the same sdist at once

    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        done = CACHE / f"{dist}-{ver}.json"
        if done.exists():
            return Path(json.loads(done.read_text())["dir"])
        dl = CACHE / f"download-{dist}-{ver}"
        dl.mkdir(exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "-d", str(dl), f"{dist}=={ver}"],
            capture_output=True, text=True, timeout=600, check=False, env={**os.environ, "PIP_NO_INPUT": "1"},
        )
        archives = [p for p in dl.iterdir() if p.name.endswith((".tar.gz", ".zip"))]
        if proc.returncode != 0 or not archives:
            pytest.skip(f"could not download the sdist of {dist}=={ver}: {proc.stderr.strip()[-300:]}")
        archive = archives[0]
        target = CACHE / f"{dist}-{ver}"
        target.mkdir(exist_ok=True)
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(target)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(target, filter="data")
        tops = [p for p in target.iterdir() if p.is_dir()]
        top = tops[0] if len(tops) == 1 else target
        done.write_text(json.dumps({"dir": str(top)}))
        return top
