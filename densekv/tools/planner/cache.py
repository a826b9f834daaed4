"""The calibration cache: one JSON file of fitted models, keyed by what they depend on.

A calibration depends on the server it was measured on (flavor, version, allocator, the
listpack settings) and on the layout's shape (layout name, entry widths, payload, TTL):
`cache_key()` spells all of them, so a model is reused only where it was measured.
Where: $DENSEKV_CACHE_DIR, else $XDG_CACHE_HOME/densekv, else ~/.cache/densekv; the file
is `calibrations.json`, replaced atomically (write + rename), so two planners running at
once can lose one entry but never corrupt the file; an unreadable file is ignored.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from densekv.tools.planner.model import Calibration

FILE = "calibrations.json"
FORMAT = 2  # bump when the model changes: older entries are then ignored (2: listpack bytes per item, not per field)


def cache_dir() -> Path:
    env = os.environ.get("DENSEKV_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "densekv"


def cache_key(server: dict[str, Any], layout: str, shape: dict[str, Any]) -> str:
    """A stable text key: server kind + settings + layout + shape."""
    parts = {"format": FORMAT, "flavor": server.get("flavor"), "version": server.get("version"),
             "allocator": server.get("allocator"), "listpack": server.get("listpack"),
             "layout": layout, "shape": shape}
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


def _path() -> Path:
    return cache_dir() / FILE


def _read() -> dict[str, Any]:
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load(key: str) -> Calibration | None:
    entry = _read().get(key)
    if not isinstance(entry, dict):
        return None
    try:
        cal = Calibration.from_dict(entry)
    except (TypeError, KeyError, ValueError):
        return None
    return Calibration.from_dict({**cal.to_dict(), "cached": True})


def store(cal: Calibration) -> Path:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read()
    data[cal.key] = {**cal.to_dict(), "cached": False}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".calibrations-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
