"""Web-session payloads as real frameworks write them (issue 11): fixed data for the tests,
the lab and benchmarks/web_sessions.py, so every figure about "a Django login" means the
same bytes.

  P0 anonymous     {"csrf_token": 40 hex}: a visitor who has seen a form; no identity
  P1 django_login  Django's three login keys (`_auth_user_id` as text, the backend path,
                   `_auth_user_hash` = 64 hex of an HMAC); identity = the user id
  P2 flask_login   Flask-Login + Flask-WTF: `_user_id`, `_fresh`, `_id` (128 hex),
                   `csrf_token` (40 hex), `_permanent`; identity = the user id
  P3 shop          P1 plus a cart of 5 items {"sku": "SKU-<6 digits>", "qty": n}, a
                   locale and the last path: 400-600 bytes as JSON

`session(profile, n)` gives session n of a profile as (identity or None, data); the same
(profile, n, seed) gives the same data on every machine (random.Random with an int seed).
User ids are below `users` (default 1M), so a large load has users with several sessions.
`write_sample(profile, path, count)` writes sessions 0 .. count-1 as a `densekv plan
--sample` file (JSON lines of {"identity": ..., "data": {...}}).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from typing import Any

from densekv.tools.lab.workloads import DEFAULT_SEED

PROFILES = ("P0", "P1", "P2", "P3")
NAMES = {"P0": "anonymous", "P1": "django_login", "P2": "flask_login", "P3": "shop"}
DJANGO_BACKEND = "django.contrib.auth.backends.ModelBackend"
_LOCALES = ("en-US", "de-DE", "fr-FR", "pt-BR", "ja-JP", "es-ES")
_PATHS = ("/products/kitchen/kettles/blue-enamel-kettle", "/checkout/shipping-address",
          "/account/orders/history", "/products/garden/tools/steel-hand-trowel",
          "/search/results", "/products/bathroom/towels/organic-cotton-bath-sheet")
_SOURCES = ("newsletter", "search", "social", "partner", "direct")


def _hex(rng: random.Random, nbytes: int) -> str:
    return rng.randbytes(nbytes).hex()


def session(profile: str, n: int, *, seed: int = DEFAULT_SEED, users: int = 1_000_000) -> tuple[int | None, dict[str, Any]]:
    """Session n of `profile` (P0-P3) as (identity, data)."""
    if profile not in PROFILES:
        raise ValueError(f"profile is one of {', '.join(PROFILES)}")
    rng = random.Random(seed * 1_000_003 + n * 4 + PROFILES.index(profile))
    uid = rng.randrange(1, users + 1)
    if profile == "P0":
        return None, {"csrf_token": _hex(rng, 20)}
    django = {"_auth_user_id": str(uid), "_auth_user_backend": DJANGO_BACKEND,
              "_auth_user_hash": _hex(rng, 32)}
    if profile == "P1":
        return uid, django
    if profile == "P2":
        return uid, {"_user_id": str(uid), "_fresh": rng.random() < 0.8, "_id": _hex(rng, 64),
                     "csrf_token": _hex(rng, 20), "_permanent": True}
    cart = [{"sku": f"SKU-{rng.randrange(10**6):06d}", "qty": rng.randrange(1, 6)} for _ in range(5)]
    return uid, {**django, "cart": cart, "locale": rng.choice(_LOCALES),
            "last_path": f"{rng.choice(_PATHS)}?ref={rng.choice(_SOURCES)}&item={rng.randrange(10**8)}"
                         f"&page={rng.randrange(1, 40)}&utm_campaign=autumn-sale-{rng.randrange(100)}"}


def django_login_written(n: int, *, seed: int = DEFAULT_SEED) -> tuple[int | None, dict[str, Any]]:
    """Session n of P1 after the end-to-end mix's one-key write (benchmarks/web_sessions.py):
    the Django login plus `"n"`, 1..10**6 (a fixed stand-in for the value wrk draws), the
    benchmarks' profile "P1n" (not hot_path.py's "P1k", whose "n" is below 100)."""
    identity, data = session("P1", n, seed=seed)
    return identity, {**data, "n": n * 7919 % 1_000_000 + 1}


def sessions(profile: str, count: int, *, start: int = 0, seed: int = DEFAULT_SEED,
             users: int = 1_000_000) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """Sessions start .. start+count-1 of a profile (a stream: O(1) memory)."""
    for n in range(start, start + count):
        yield session(profile, n, seed=seed, users=users)


def write_sample(profile: str, path: str | os.PathLike[str], count: int, *, seed: int = DEFAULT_SEED) -> None:
    """Sessions 0 .. count-1 of `profile` as a `densekv plan --sample` file."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"identity": identity, "data": data}, separators=(",", ":")) + "\n"
                      for identity, data in sessions(profile, count, seed=seed))
