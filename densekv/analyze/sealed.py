"""Key names in the resume file, sealed: the file can be shared, its key file cannot.

The resume file must hold key names (each pattern's reservoir, for the replay and the
per-pattern sample; the keys a prefix sample took), and a key name can hold a session
token. So they are written sealed: SHAKE-256(key || nonce) as a keystream XORed over the
JSON of the names, a fresh 16-byte nonce per write, the 32-byte key in `FILE.key` beside
the resume file (created with mode 0600 on the first write, reused after). Everything
else in the resume file is the masked pattern table. Sealing 20 MB of names (the most a
table holds: 500 patterns x 1000 names) takes tens of milliseconds.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from pathlib import Path

from densekv.errors import AnalyzeError

KEY_BYTES = 32
NONCE_BYTES = 16


def key_path(resume: str) -> Path:
    return Path(f"{resume}.key")


def resume_key(resume: str, create: bool) -> bytes:
    """The resume file's sealing key (made on the first write when `create`)."""
    path = key_path(resume)
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        if not create:
            raise AnalyzeError(f"{resume} holds key names sealed with {path}, which is missing: "
                               "remove the resume file to start over") from None
    except (OSError, ValueError) as exc:
        raise AnalyzeError(f"cannot read {path}: {exc}") from None
    key = secrets.token_bytes(KEY_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.hex())
    return key


def _xor(data: bytes, key: bytes, nonce: bytes) -> bytes:
    stream = hashlib.shake_256(key + nonce).digest(len(data))
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(data), "big")


def seal(data: bytes, key: bytes) -> str:
    nonce = secrets.token_bytes(NONCE_BYTES)
    return base64.b64encode(nonce + _xor(data, key, nonce)).decode("ascii")


def unseal(text: str, key: bytes) -> bytes:
    raw = base64.b64decode(text)
    return _xor(raw[NONCE_BYTES:], key, raw[:NONCE_BYTES])
