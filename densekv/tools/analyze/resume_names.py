"""The key names a resume file needs, kept beside it in `FILE.names`: never share that file.

A resume file (`--resume FILE`) holds the masked pattern table, which can be shared. To go
on, the scan also needs raw key names: each pattern's reservoir (for the replay and the
per-pattern sample) and the keys a prefix sample took. A key name can hold a session
token, so these go into a sidecar, `FILE.names`: JSON `{"id", "seen", "reservoirs"}`,
created with mode 0600, written to a temporary file and renamed like the resume file.
It is not encrypted: it is a file of key names (possibly live tokens) for this machine
only, guarded by its permissions, and deleted with the resume file. The resume file
names the sidecar's `id` (a random stamp of the write), so a sidecar left by another run
is refused instead of mixing two scans. Up to ~20 MB (500 patterns x 1000 names).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from densekv.errors import AnalyzeError

MODE = 0o600


def names_path(resume: str) -> Path:
    return Path(f"{resume}.names")


def write_names(resume: str, names: dict[str, Any]) -> str:
    """Write the sidecar of `resume` (mode 0600, atomically); returns its stamp."""
    stamp = secrets.token_hex(8)
    path = names_path(resume)
    tmp = Path(f"{path}.tmp")
    tmp.unlink(missing_ok=True)  # O_CREAT keeps an old file's mode: make it anew
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, MODE)
    with os.fdopen(fd, "w") as fh:
        os.fchmod(fh.fileno(), MODE)  # whatever the umask
        json.dump({"id": stamp, **names}, fh)
    os.replace(tmp, path)
    return stamp


def read_names(resume: str, stamp: object) -> dict[str, Any]:
    """The sidecar of `resume`, checked against the stamp the resume file recorded."""
    path = names_path(resume)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise AnalyzeError(f"{resume} needs the key names kept in {path}, which is missing: "
                           "remove the resume file to start over") from None
    except OSError as exc:
        raise AnalyzeError(f"cannot read {path}: {exc.strerror}") from None
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("seen"), dict) \
            or not isinstance(doc.get("reservoirs"), dict):
        raise AnalyzeError(f"{path} is not a densekv analyze names file: remove it and {resume} "
                           "to start over")
    if doc.get("id") != stamp:
        raise AnalyzeError(f"{path} was written by another run than {resume}: remove both to start over")
    return doc
