"""How often the analyzer's token test (densekv/tools/analyze/patterns.py token_looking) misses a
random token, and how often it masks an ordinary identifier (issue 32, part 2).

Misses: N draws (fixed seed) of each token family: Flask-Session ids (base64url of 32
bytes), densekv tokens (of 24), Django session keys (32 of [a-z0-9]), base62 ids of 16, 22
and 27 characters, and families that only chance produces from those (43 letters and
underscores; 32 lower-case letters; 22 upper-case letters and digits). Masked: the
identifiers of 16+ characters in the Python standard library's sources (names and string
literals of URL-safe characters), which are mostly ordinary names and partly real tokens
and test data - so the share is an upper bound on the false positives.

Usage: python benchmarks/token_masking.py [--n 300000] [--seed 2] [--out FILE] [--no-save]
"""

from __future__ import annotations

import argparse
import base64
import random
import re
import string
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

import gitstamp  # benchmarks/gitstamp.py
from records import emit  # benchmarks/records.py

from densekv.tools.analyze.patterns import token_looking

B62 = string.ascii_letters + string.digits


def families(rng: random.Random) -> dict[str, Callable[[], str]]:
    def b64url(n: int) -> str:
        return base64.urlsafe_b64encode(rng.randbytes(n)).rstrip(b"=").decode()

    def chars(alphabet: str, k: int) -> str:
        return "".join(rng.choices(alphabet, k=k))

    return {"flask-session-43": lambda: b64url(32), "densekv-32": lambda: b64url(24),
            "django-32": lambda: chars(string.ascii_lowercase + string.digits, 32),
            "base62-16": lambda: chars(B62, 16), "base62-22": lambda: chars(B62, 22), "base62-27": lambda: chars(B62, 27),
            "letters-underscore-43": lambda: chars(string.ascii_letters + "_", 43),
            "lowercase-32": lambda: chars(string.ascii_lowercase, 32),
            "upper-digits-22": lambda: chars(string.ascii_uppercase + string.digits, 22)}


def stdlib_identifiers() -> list[str]:
    found: set[str] = set()
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        found.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]{15,}", text))
        found.update(re.findall(r"['\"]([A-Za-z][A-Za-z0-9_-]{15,})['\"]", text))
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "token_masking.jsonl"))
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    rng = random.Random(args.seed)
    misses: dict[str, int] = {}
    examples: dict[str, list[str]] = {}
    for name, draw in families(rng).items():
        missed = [t for t in (draw() for _ in range(args.n)) if not token_looking(t)]
        misses[name] = len(missed)
        examples[name] = missed[:3]
    names = stdlib_identifiers()
    masked = [n for n in names if token_looking(n)]
    emit({"benchmark": "token_masking", "commit": gitstamp.commit(), "n": args.n, "seed": args.seed,
          "misses": misses, "miss_examples": examples, "stdlib_identifiers": len(names), "stdlib_masked": len(masked),
          "stdlib_masked_share": round(len(masked) / max(1, len(names)), 4), "masked_examples": masked[::max(1, len(masked) // 12)],
          "seconds": round(time.monotonic() - started, 1)}, None if args.no_save else args.out)


if __name__ == "__main__":
    main()
