"""The analyzer never prints a secret: every token of the usual families is grouped into
its pattern, whatever its letters happen to be, and ordinary names stay printed (issue 32).

A session id in a key name is a bearer token and reports are shared, so one ungrouped id
in 10^5 is a leak, not noise: the test draws as many as the issue names, with a fixed seed.
"""

from __future__ import annotations

import base64
import hashlib
import random
import string
import uuid

import pytest

from densekv.tools.analyze.patterns import Rules, token_looking
from densekv.tools.analyze.table import PatternTable

SEED = 32
B62 = string.ascii_letters + string.digits


def _b64url(rng: random.Random, n: int) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(n)).rstrip(b"=").decode()


#: family -> (how many, a token, the key it is stored under, the pattern it must become)
FAMILIES = {
    "flask-session": (200_000, lambda rng: _b64url(rng, 32), "session:{}", "session:{tok}"),
    "densekv": (200_000, lambda rng: _b64url(rng, 24), "sess:{}:data", "sess:{tok}:data"),
    "uuid": (100_000, lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)), "job:{}", "job:{uuid}"),
    "hex-digest": (100_000, lambda rng: hashlib.sha256(rng.randbytes(16)).hexdigest(),
                   "cache:views.GET.{}.en-us", "cache:views.GET.{hex}.en-us"),
    "base62": (100_000, lambda rng: "".join(rng.choices(B62, k=22)), "link/{}", "link/{tok}"),
}

#: ordinary keys and their patterns: words and camelCase stay printed
ORDINARY = [
    ("user:1001:profile", "user:{n}:profile"), ("someCamelCaseIdentifier", "someCamelCaseIdentifier"),
    ("user_preferences_cache", "user_preferences_cache"), ("config:featureFlags:checkoutRedesign",
                                                           "config:featureFlags:checkoutRedesign"),
    ("leaderboard:weekly:2024", "leaderboard:weekly:{n}"), ("notificationSettings:7", "notificationSettings:{n}"),
    ("XMLHttpRequest:queue", "XMLHttpRequest:queue"), ("rate_limit_per_minute:api", "rate_limit_per_minute:api"),
    ("shoppingCartItems:42", "shoppingCartItems:{n}"), ("recommendationsForUser:9", "recommendationsForUser:{n}"),
    ("analytics_events_v2:today", "analytics_events_v{n}:today"), ("getUserByEmailAddress", "getUserByEmailAddress"),
    ("HTTPResponseHeaders:cache", "HTTPResponseHeaders:cache"), ("celery-task-meta-index", "celery-task-meta-index"),
]


def _keys() -> list[tuple[str, str]]:
    """(key, expected pattern) for every token of every family, then the ordinary keys."""
    rng = random.Random(SEED)
    out = [(fmt.format(make(rng)), pattern) for n, make, fmt, pattern in FAMILIES.values() for _ in range(n)]
    out += ORDINARY * 10
    rng.shuffle(out)
    return out


def test_no_token_is_left_out_of_its_pattern() -> None:
    """700k tokens of five families among ordinary names: the table holds exactly the
    families' patterns and the ordinary ones (not one row of a single key)."""
    table = PatternTable()
    wrong: dict[str, str] = {}
    for key, pattern in _keys():
        stats = table.stats_for(key.encode())
        stats.names += 1
        if stats.name != pattern and len(wrong) < 5:
            wrong[key] = stats.name
    assert not wrong, f"seed {SEED}: keys not grouped as expected: {wrong}"
    table.merge_similar()
    expected = {p for *_, p in FAMILIES.values()} | {p for _, p in ORDINARY}
    assert {s.name for s in table} == expected
    assert {s.name: s.names for s in table}["session:{tok}"] == 200_000


@pytest.mark.parametrize("text", [
    "xeUDsrXLHCTDZXxdpceBSHNsNZKITFEZSkGPOLyGJrs",  # letters only (1 Flask-Session id in ~2000)
    "BTGIroFEXhnk_IFZqTmLPBWPZEYDOtJGL_hxXRDCnag",  # letters and underscores
    "IMuiLCERBeweDTMMSlCZXIPCCHHXjNds", "ezuHHzrqGsg-W-_yzodstiEWfuslC-AO",  # densekv-style, no digits
    "hojhydlegDJUPDYbdrdHE77", "8WIBIAHRh6643niedewpee",  # base62
    "0a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p",  # Django's
])
def test_tokens_without_the_usual_look(text: str) -> None:
    assert token_looking(text)
    assert Rules().name(f"session:{text}".encode()) == "session:{tok}"


@pytest.mark.parametrize("text", [
    "someCamelCaseIdentifier", "user_preferences_cache", "notificationSettings", "ProductCatalogCache",
    "feature_flags_enabled", "getUserByEmailAddress", "HTTPResponseHeaders",
    "rate_limit_per_minute", "recommendationsForUser", "shoppingCartItems", "celery-task-meta-index"])
def test_ordinary_names_are_not_tokens(text: str) -> None:
    assert not token_looking(text)
