"""What densekv has for a pattern, decided from the scan's statistics (pure, no I/O).

`choose(stats)` decides; replay.py measures; `final(choice, saving)` turns a measured
saving under MIN_SAVING into "leave as is" with the reason; `command_for` writes what to
run. Deciding apart from doing, as the planner does (choose_layout / make_layout).

    kind          when                                             densekv
    sessions      a known session format (Flask-Session, Django     SessionStore (dense)
                  cache backend, starsessions), or small dicts /
                  hashes with a TTL under a token-like name
    set           per-ID flag keys (`seen:{uuid}` = "1", no TTL):   CompactSet
                  one variable part that is a fixed-size ID
    set-members   SETs of fixed-size IDs, big or few                CompactSet (one per key)
    family        many small SETs (or HASHes of flags) per parent   SetFamily
    map           integers, short values, per-ID flags with a TTL   CompactMap (densekv migrate)
    map-zstd      JSON values of 128 bytes or more                  CompactMap + zstd dictionary
    leave         mixed types, zsets, lists, streams, module types,
                  big values, or a measured saving under 20%
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from densekv.tools.analyze.patterns import HEX, TOK, UUID, N
from densekv.tools.analyze.table import PatternStats

MIN_SAVING = 0.20  # below this the pattern is left as it is
MIN_SAMPLED = 3  # keys of a pattern in the sample before it is measured
ID_PLACEHOLDERS = (UUID, HEX, N, TOK)
SESSION_MAX_BYTES = 16 * 1024
SMALL_SET = 512  # members: a set up to this is "small" (one per parent: a family)
ZSTD_MIN = 128  # mean bytes of JSON values from which a zstd dictionary is worth trying


@dataclass(frozen=True)
class Choice:
    kind: str
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def measurable(self) -> bool:
        return self.kind != "leave"


def _share(counter: dict[str, int], *names: str) -> float:
    total = sum(counter.values())
    return sum(counter.get(n, 0) for n in names) / total if total else 0.0


def id_item(stats: PatternStats) -> dict[str, Any] | None:
    """How the pattern's one variable part becomes a fixed-size set item, if it can."""
    holes = [p for p in stats.placeholders]
    if len(holes) != 1 or holes[0] not in ID_PLACEHOLDERS or len(stats.id_sizes) != 1:
        return None
    chars = int(next(iter(stats.id_sizes)))
    if holes[0] == UUID:
        return {"id": "uuid", "item_size": 16}
    if holes[0] == HEX and chars % 2 == 0 and chars <= 128:
        return {"id": "hex", "item_size": chars // 2}
    if holes[0] == N:
        return {"id": "int", "item_size": 8}
    if holes[0] == TOK and chars % 4 != 1 and chars * 3 // 4 <= 64:
        return {"id": "b64url", "item_size": chars * 3 // 4}
    return None


def choose(stats: PatternStats) -> Choice:
    kind, share = stats.main(stats.types)
    if kind is None or share < 0.9:
        return Choice("leave", "mixed types (" + ", ".join(sorted(stats.types)) + ")")
    if kind not in ("string", "hash", "set"):
        return Choice("leave", f"densekv has no layout for {kind}s")
    samples = max(1, stats.shape_samples)
    mean_len = stats.lengths / samples
    big_sets = _set_members(stats, mean_len) if kind == "set" else None
    if big_sets is not None:
        return big_sets
    if stats.keys < MIN_SAMPLED:
        return Choice("leave", f"only {stats.keys} key(s) of it in the sample: too few to measure")
    if kind == "string":
        return _string(stats, mean_len)
    if kind == "hash":
        if stats.flag_hashes / samples >= 0.8:
            return Choice("family", "hashes whose values are all one constant: sets kept as hashes (seed 002)",
                          {"children": "fields", "max_children": mean_len})
        if stats.ttl_share >= 0.8 and _token_named(stats) and mean_len <= 64:
            return Choice("sessions", "small hashes with a TTL under a token: sessions", {"format": "hash"})
        return Choice("leave", "hashes with values: densekv has no layout for them (small ones are listpacks already)")
    if kind == "set":
        if mean_len <= SMALL_SET:
            return Choice("family", f"many small SETs ({mean_len:,.1f} members on average), one per parent "
                          "(seed 002)", {"children": "members", "max_children": mean_len})
        return Choice("leave", f"big SETs of text members ({mean_len:,.0f} on average): densekv keeps fixed-size IDs")
    return Choice("leave", f"densekv has no layout for {kind}s")


def _set_members(stats: PatternStats, mean_len: float) -> Choice | None:
    """SETs of fixed-size IDs, big or few: one CompactSet each."""
    size, size_share = stats.main(stats.member_sizes)
    what, what_share = stats.main(stats.member_kinds)
    if what not in ("uuid", "hex", "int", "binary") or what_share < 0.99:
        return None
    if what != "int" and (size is None or size_share < 0.99 or int(size) > 128):
        return None
    if mean_len < SMALL_SET and stats.keys > 16:
        return None
    size = size or "8"
    return Choice("set-members", f"SETs of {size}-byte IDs ({what}), {mean_len:,.0f} members on average",
                  {"member_kind": what, "member_size": int(size)})


def _token_named(stats: PatternStats) -> bool:
    holes = stats.placeholders
    return bool(holes) and holes[-1] in (TOK, HEX, UUID)


def _string(stats: PatternStats, mean_len: float) -> Choice:
    samples = max(1, stats.shape_samples)
    sessions = sum(stats.sessions.values()) / samples
    fmt, _ = stats.main(stats.sessions)
    if sessions >= 0.8 and mean_len <= SESSION_MAX_BYTES and (fmt != "dict" or stats.ttl_share >= 0.8):
        # the report prints "<kind>: <reason>": the reason says what wrote them, not "sessions" again
        names = {"flask-session": "written by Flask-Session (RedisSessionInterface)",
                 "django": "written by Django's cache session backend",
                 "starsessions": "written by starsessions (RedisStore)",
                 "dict": "small dicts with a TTL under a token-like name"}
        return Choice("sessions", names.get(fmt or "", f"written by {fmt}"), {"format": fmt})
    if _share(stats.shapes, "large") > 0.5 or mean_len > SESSION_MAX_BYTES:
        return Choice("leave", f"values of {mean_len / 1024:,.0f} KB on average: the key's own cost is a small part")
    small = _share(stats.shapes, "integer", "empty", "text", "binary") >= 0.99 and mean_len <= 8
    item = id_item(stats)
    if small and len(stats.small_values) <= 2 and item is not None:
        if stats.ttl_share == 0:
            return Choice("set", f"per-ID flags ({item['id']} IDs, value {_values(stats)}): a set of IDs (seed 001)",
                          item)
        return Choice("map", f"per-ID flags with a TTL ({item['id']} IDs): a map keeps each TTL", {})
    json_share = _share(stats.shapes, "json", "json-dict")
    if json_share >= 0.8 and mean_len >= ZSTD_MIN and _zstd_available():
        return Choice("map-zstd", f"JSON values of {mean_len:,.0f} bytes on average: a map with a zstd dictionary",
                      {"zstd": True})
    if _share(stats.shapes, "integer") >= 0.8:
        return Choice("map", "integer values (counters): a map (seed 004)", {})
    return Choice("map", f"short values ({mean_len:,.0f} bytes on average): a map (seed 004)", {})


def _values(stats: PatternStats) -> str:
    return " / ".join(repr(v) for v in sorted(stats.small_values)) or "?"


def _zstd_available() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


def final(choice: Choice, saving: float | None) -> Choice:
    """Leave the pattern as it is when the measured saving is under MIN_SAVING."""
    if choice.kind == "leave" or saving is None or saving >= MIN_SAVING:
        return choice
    return Choice("leave", f"densekv would save only {saving:.0%} here (measured; {choice.kind} tried)",
                  {**choice.detail, "tried": choice.kind})


# --- what to run ---------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")


SESSIONS_NAMESPACE = "sess"  # the SessionStore the sessions' command builds


def namespace_for(stats: PatternStats) -> str:
    """A densekv namespace named after the pattern's literal words ("user:{n}:visits" ->
    "user_visits")."""
    words = [w for is_ph, text in stats.tokens if not is_ph for w in _WORD.findall(text)]
    return "_".join(words[:3]).lower() or "analyzed"


#: where a URL with a password goes in a printed command (the URL itself is never printed)
URL_VARIABLE = "DENSEKV_URL"


def _url_arg(url: str) -> tuple[str, str]:
    """(the --url argument, a trailing shell comment) for a printed command: a URL shown
    with its password hidden (redis://:***@...) would not connect, so such a command reads
    the URL from $DENSEKV_URL and says so. So does a command for a dump (`--rdb`: `url` is
    the files' names), which runs against the server the dump was taken from."""
    if ":***@" in url:
        return f'"${URL_VARIABLE}"', f"  # {URL_VARIABLE}: {url} with its password"
    if "://" not in url:
        return f'"${URL_VARIABLE}"', f"  # {URL_VARIABLE}: the server {url} was dumped from"
    return shlex.quote(url), ""


def command_for(choice: Choice, stats: PatternStats, keys: int, url: str) -> str:
    """The command or code that moves the pattern into the layout that was measured: each
    one runs as printed (Python lines name their imports; shell commands take the URL from
    $DENSEKV_URL when it holds a password)."""
    ns = namespace_for(stats)
    glob = shlex.quote(stats.glob)
    kind = choice.detail.get("tried") if choice.kind == "leave" else choice.kind
    if choice.kind == "leave":
        return "-"
    if kind == "map":
        arg, note = _url_arg(url)
        return f"densekv migrate --url {arg} --namespace {ns} --pattern {glob} --expected {keys}{note}"
    if kind == "map-zstd":
        return (f"m = densekv.CompactMap(client, {ns!r}, expected={keys}, codec='zstd'); "
                f"m.train(<a few hundred values of {stats.glob}>); m.migrate_from({stats.glob!r})")
    if kind == "sessions":
        fmt = choice.detail.get("format")
        store = f"densekv.SessionStore(client, {SESSIONS_NAMESPACE!r}, expected_sessions={keys})"
        if fmt == "flask-session":
            prefix = stats.glob.rstrip("*")
            return ("import densekv; from densekv.integrations.flask import FlaskSessionFallback, SessionInterface; "
                    f"app.session_interface = SessionInterface({store}, "
                    f"fallback=FlaskSessionFallback(client, key_prefix={prefix!r}))  # moves each session on its "
                    "next request")
        if fmt == "django":
            return ("import os; SESSION_ENGINE = 'densekv.integrations.django'; "
                    f"DENSEKV_SESSIONS = {{'url': os.environ[{URL_VARIABLE!r}], 'fallback': 'cache'}}"
                    "  # settings.py: moves each session on its next request")
        if fmt == "starsessions":
            prefix = stats.glob.rstrip("*")
            return ("import os; from densekv.integrations.starlette import SessionMiddleware, StarsessionsRedis; "
                    f"app.add_middleware(SessionMiddleware, url=os.environ[{URL_VARIABLE!r}], "
                    f"move_in=StarsessionsRedis(prefix={prefix!r}))  # moves each session on its next request")
        return (f"store = {store}; for each key of {stats.glob!r}: store.create(None, <its data>, <its TTL>, "
                "token=<the id in the key>)")
    if kind == "set":
        return (f"s = densekv.CompactSet(client, {ns!r}, expected={keys}, item_size={choice.detail['item_size']}); "
                f"s.add_many(<the {choice.detail['id']} IDs of SCAN MATCH {stats.glob!r}>); then UNLINK those keys")
    if kind == "set-members":
        return (f"densekv.CompactSet(client, <name per key>, expected=<SCARD>, item_size={choice.detail['member_size']})"
                f".add_many(<SSCAN of each key of {stats.glob!r}>)")
    if kind == "family":
        children = choice.detail.get("expected_children")
        extra = f", expected_children={children}" if children else ""
        return (f"f = densekv.SetFamily(client, {ns!r}{extra}); f.add_many(<parent>, <members>) for each key of "
                f"{stats.glob!r}, then UNLINK it")
    return "-"
