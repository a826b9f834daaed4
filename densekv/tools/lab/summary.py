"""What the report says first: for each kind, what to do on this server, and each seed
story's verdict - computed from a results.json document alone (pure, no server).

`advice(doc)` gives, per server and kind, the obvious layout against densekv's choice as
measured in this run: bytes per item of each, the saving in % and in GiB per 100M items,
the server's time per read of each, and the call (and any config change) to make. The
obvious layouts are the seeds' baselines: one JSON string per session (seed 000), one SET
holding every ID (seed 001), one string key per value (seed 004), one SET per small set
(seed 002). `verdicts(doc)` states each seed's claim and whether this run confirms it;
seed 003's per session container, from its points (containers.findings.Trend), which
`headline` also prints one line each.
A row or verdict whose records are missing (an interrupted run, `--only`) is left out;
nothing here is typed in but the seeds' claims.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

GIB = 1 << 30
PER = 100_000_000  # the saving is stated per 100M items

#: how seed 004's cases read in a summary line
CASE_WORDS = {
    "int_holey": "integer values under scattered ids",
    "int_seq": "integer values under ids 0..n",
    "str8": "8-character string values",
    "json": "JSON objects of 80-200 bytes",
    "html": "HTML text of 200-1500 bytes",
}


@dataclass(frozen=True)
class Advice:
    server: str
    kind: str
    what: str  # the data, in the user's words
    plain: str  # the obvious layout
    plain_bytes: float
    chosen: str  # densekv's (or the seed's) better layout
    chosen_bytes: float
    call: str  # the densekv call or the command to run
    todo: str  # what else to know, in a sentence
    plain_usec: float | None = None  # server µs per read
    chosen_usec: float | None = None
    unit: str = "item"
    measure: str = ""  # how the bytes were read, when not used_memory (the terminal table's rows say the same)

    @property
    def saving(self) -> float:
        """Share of the plain layout's bytes saved (0.8 = 80% less)."""
        return 1 - self.chosen_bytes / self.plain_bytes if self.plain_bytes > 0 else 0.0

    @property
    def gib_per_100m(self) -> float:
        return (self.plain_bytes - self.chosen_bytes) * PER / GIB


@dataclass(frozen=True)
class Verdict:
    seed: str
    kind: str
    server: str
    claim: str
    measured: str
    word: str  # "confirmed" | "confirmed, and more" | "differs"
    why: str = ""  # for "differs": what the claim would need here

    @property
    def sentence(self) -> str:
        why = f": {self.why}" if self.why and self.word == "differs" else ""
        return f"Seed {self.seed} claims {self.claim}. Here: {self.measured} - {self.word}{why}."


def _runs(doc: dict[str, Any], kind: str, server: str) -> dict[str, dict[str, Any]]:
    return {str(r.get("variant") or r["layout"]): r for r in doc["runs"]
            if r["kind"] == kind and r["server"] == server and r.get("bytes_per_item") is not None}


def _servers(doc: dict[str, Any]) -> list[str]:
    return [s["name"] for s in doc["servers"]]


def _usec(record: dict[str, Any], op: str) -> float | None:
    value = (record.get("ops") or {}).get(op, {}).get("server_usec_per_call")
    return None if value is None else float(value)


def _per_entry_at(record: dict[str, Any], entries: int) -> float | None:
    """MEMORY USAGE per entry of a small_sets record at the grid size nearest `entries`."""
    points = [p for p in record.get("points", []) if p.get("memory_usage_bytes_per_item") is not None]
    if not points:
        return None
    best = min(points, key=lambda p: abs(int(p["n"]) - entries))
    return float(best["memory_usage_bytes_per_item"]) if best["n"] == entries else None


def advice(doc: dict[str, Any]) -> list[Advice]:
    """What to do, per server and kind, from this run's records."""
    out: list[Advice] = []
    for server in _servers(doc):
        out += _sessions(doc, server) + _sets(doc, server) + _maps(doc, server) + _small_sets(doc, server)
    return out


def _sessions(doc: dict[str, Any], server: str) -> list[Advice]:
    runs = _runs(doc, "sessions", server)
    if "json" not in runs or "dense" not in runs:
        return []
    plain, dense = runs["json"], runs["dense"]
    return [Advice(
        server, "sessions", f"sessions (N = {dense['n']:,})", "one JSON key per session (SETEX)",
        plain["bytes_per_item"], f"densekv dense, {dense['partitions']:,} partitions", dense["bytes_per_item"],
        "SessionStore(client, expected_sessions=N)",
        "Layout auto is dense here; no config change. The identity index (log out everywhere) adds about "
        "17 B per session: index_identities=False if you never need it.",
        _usec(plain, "get"), _usec(dense, "get"), "session",
    )]


def _sets(doc: dict[str, Any], server: str) -> list[Advice]:
    runs = _runs(doc, "sets", server)
    plain = runs.get("set P=1")
    dense = runs.get("dense")
    if plain is None or dense is None:
        return []
    todo = "Layout auto is dense here; no config change."
    bloom = next((r for label, r in runs.items() if label.startswith("bloom p=0.01")), None)
    if bloom is not None:
        todo += (f" If 1% false positives are acceptable, BloomFilter(client, name, capacity=N, "
                 f"error_rate=0.01) takes {bloom['bytes_per_item']:.2f} B per ID.")
    return [Advice(
        server, "sets", f"a set of 16-byte IDs (N = {dense['n']:,})", "one SET holding every ID (SADD)",
        plain["bytes_per_item"], f"densekv dense ({(dense.get('params') or {}).get('encoding') or 'listpacks'}, "
        f"{dense['partitions']:,} partitions)", dense["bytes_per_item"], "CompactSet(client, name, expected=N)", todo,
        _usec(plain, "contains_hit"), _usec(dense, "contains_hit"), "ID",
    )]


def _map_call(codec: str) -> tuple[str, str]:
    if codec == "zstd+dict":
        return ('CompactMap(client, namespace, codec="zstd"); .train(sample values)',
                "Train once on a few hundred values: the dictionary is stored in the server (counted here).")
    return f'CompactMap(client, namespace, codec="{codec}")', "No config change."


def _maps(doc: dict[str, Any], server: str) -> list[Advice]:
    runs = [r for r in _runs(doc, "maps", server).values()]
    out: list[Advice] = []
    for case, words in CASE_WORDS.items():
        mine = [r for r in runs if (r.get("params") or {}).get("case") == case]
        plain = next((r for r in mine if r["layout"] == "plain"), None)
        maps = [r for r in mine if r["layout"] == "map"]
        if plain is None or not maps:
            continue
        best = min(maps, key=lambda r: r["bytes_per_item"])
        codec = str((best.get("params") or {}).get("codec_name") or "raw")
        out.append(Advice(
            server, "maps", f"{words} (n = {best['n']:,})", "one string key per value (SET)",
            plain["bytes_per_item"], f"densekv map, codec {codec}", best["bytes_per_item"], *_map_call(codec),
            _usec(plain, "get"), _usec(best, "get"),
        ))
    return out


def _small_sets(doc: dict[str, Any], server: str) -> list[Advice]:
    runs = {(r["layout"], (r.get("params") or {}).get("config")): r for r in doc["runs"]
            if r["kind"] == "small_sets" and r["server"] == server}
    out: list[Advice] = []
    hash_d, set_d = runs.get(("hash", "default")), runs.get(("set", "default"))
    if hash_d and set_d:
        limit = int(hash_d["params"]["limits"].get("hash-max-listpack-entries", 0))
        h, s = _per_entry_at(hash_d, limit), _per_entry_at(set_d, limit)
        if limit and h is not None and s is not None:
            out.append(Advice(
                server, "small_sets", f"a small set of {limit:,} 24-byte members", "a SET (SADD)", s,
                "a HASH, member -> 1 (HSET)", h, "HSET key member 1",
                f"Instead of SADD, while a set stays within hash-max-listpack-entries ({limit:,} here).",
                unit="member", measure=f"MEMORY USAGE per member at {limit:,}/key, the listpack limit",
            ))
    hash_r = runs.get(("hash", "raised")) or next(
        (r for r in doc["runs"] if r["kind"] == "small_sets" and r["layout"] == "hash"
         and (r.get("params") or {}).get("config") == "raised" and r["server"] not in _servers(doc)), None)
    if hash_d and hash_r:
        before = int(hash_d["params"]["limits"].get("hash-max-listpack-entries", 0))
        raised = int(hash_r["params"]["limits"].get("hash-max-listpack-entries", 0))
        a, b = _per_entry_at(hash_d, raised), _per_entry_at(hash_r, raised)
        if a is None:
            a = _nearest_above(hash_d, raised)
        if raised and a is not None and b is not None:
            out.append(Advice(
                server, "small_sets",
                f"a HASH of {raised:,} entries", f"hash-max-listpack-entries {before:,} (in force)", a,
                f"hash-max-listpack-entries {raised:,}", b, f"CONFIG SET hash-max-listpack-entries {raised}",
                f"Optional (and in the config file): hashes of up to {raised:,} entries stay listpacks. densekv "
                "sizes its partitions to whatever limit is in force and needs no change.", unit="entry",
                measure=f"MEMORY USAGE per entry at {raised:,}/key",
            ))
    return out


def _nearest_above(record: dict[str, Any], entries: int) -> float | None:
    points = [p for p in record.get("points", []) if p.get("memory_usage_bytes_per_item") is not None
              and int(p["n"]) >= entries]
    return float(min(points, key=lambda p: int(p["n"]))["memory_usage_bytes_per_item"]) if points else None


# -- the seeds' claims ---------------------------------------------------------------------


def _needs(claimed: float, plain: float, chosen: float, unit: str) -> str:
    """What a claimed saving of `claimed`% would take here."""
    return (f"{claimed:.0f}% less than {plain:.1f} B would be {plain * (1 - claimed / 100):.1f} B per {unit}, "
            f"measured {chosen:.1f} B")


def _word_share(claimed: float, measured: float) -> str:
    """Savings in % points: within 10 points is the claim, more is more, less differs."""
    if measured > claimed + 10:
        return "confirmed, and more"
    return "confirmed" if measured >= claimed - 10 else "differs"


def _word_ratio(claimed: float, measured: float) -> str:
    if measured > claimed * 1.25:
        return "confirmed, and more"
    return "confirmed" if measured >= claimed * 0.8 else "differs"


def verdicts(doc: dict[str, Any]) -> list[Verdict]:
    out: list[Verdict] = []
    for server in _servers(doc):
        out += list(_verdicts_on(doc, server))
    return out


def _verdicts_on(doc: dict[str, Any], server: str) -> Iterable[Verdict]:
    s = _runs(doc, "sessions", server)
    if "json" in s and "zset seed 1M" in s:
        saving = 100 * (1 - s["zset seed 1M"]["bytes_per_item"] / s["json"]["bytes_per_item"])
        dense = (f"; densekv's dense layout {100 * (1 - s['dense']['bytes_per_item'] / s['json']['bytes_per_item']):.0f}%"
                 if "dense" in s else "")
        yield Verdict("000", "sessions", server,
                      "that partitioned HASH + ZSET, with the partition count right (1M partitions for 40M "
                      "sessions), use almost 70% less memory than one JSON key per session",
                      f"{saving:.0f}% less with the 1M partitions scaled to N = {s['json']['n']:,} "
                      f"({s['zset seed 1M']['partitions']:,} partitions){dense}",
                      _word_share(70, saving), _needs(70, s["json"]["bytes_per_item"],
                                                      s["zset seed 1M"]["bytes_per_item"], "session"))
    sets = _runs(doc, "sets", server)
    hashes = [r for label, r in sets.items() if r["layout"] == "hash"]
    flat = sets.get("flat P=1")
    if hashes and flat:
        best = min(hashes, key=lambda r: r["bytes_per_item"])
        saving = 100 * (1 - best["bytes_per_item"] / flat["bytes_per_item"])
        yield Verdict("001", "sets", server,
                      "that HASH partitions at their listpack sweet spot store 128-bit IDs in about 65% less "
                      "memory than one key per ID",
                      f"{saving:.0f}% less (hash at {best['partitions']:,} partitions, {best['bytes_per_item']:.1f} "
                      f"B per ID, against {flat['bytes_per_item']:.1f} B for flat keys)", _word_share(65, saving),
                      _needs(65, flat["bytes_per_item"], best["bytes_per_item"], "ID"))
        bloom = next((r for label, r in sets.items() if label.startswith("bloom p=1e-06")), None)
        if bloom:
            saving = 100 * (1 - bloom["bytes_per_item"] / best["bytes_per_item"])
            yield Verdict("001", "sets", server,
                          "that a Bloom filter at 1-in-a-million false positives would take about 90% less "
                          "memory than that exact layout",
                          f"{saving:.0f}% less ({bloom['bytes_per_item']:.2f} B per ID)", _word_share(90, saving),
                          _needs(90, best["bytes_per_item"], bloom["bytes_per_item"], "ID"))
    small = {(r["layout"], (r.get("params") or {}).get("config")): r for r in doc["runs"]
             if r["kind"] == "small_sets" and r["server"] == server}
    if ("hash", "default") in small and ("set", "default") in small:
        hash_d = small[("hash", "default")]
        limit = int(hash_d["params"]["limits"].get("hash-max-listpack-entries", 0))
        h, st = _per_entry_at(hash_d, limit), _per_entry_at(small[("set", "default")], limit)
        if h is not None and st:
            saving = 100 * (1 - h / st)
            yield Verdict("002", "small_sets", server,
                          "that below hash-max-ziplist-entries a HASH (member -> 1) takes about 56% less memory "
                          "than a SET of the same members",
                          f"{saving:.0f}% less at {limit:,} members ({h:.1f} against {st:.1f} B per member, "
                          "MEMORY USAGE as the seed read it)", _word_share(56, saving),
                          _needs(56, st, h, "member"))
    yield from _containers_verdicts(doc, server)
    maps = _runs(doc, "maps", server)
    claims = (("int_holey", "int", 10.0, ("integers in hash buckets take about 10 times less memory than one "
                                          "key per integer")),
              ("html", "zlib", 2.5, ("HTML pieces compressed with gzip in hash buckets take 2.5-3 times less "
                                     "memory than plain keys")))
    for case, codec, claimed, what in claims:
        plain, mapped = maps.get(f"{case} · plain SET"), maps.get(f"{case} · map {codec}")
        if plain and mapped and mapped["bytes_per_item"] > 0:
            ratio = plain["bytes_per_item"] / mapped["bytes_per_item"]
            yield Verdict("004", "maps", server, f"that {what}",
                          f"{ratio:.1f} times less ({mapped['bytes_per_item']:.1f} against "
                          f"{plain['bytes_per_item']:.1f} B per item)", _word_ratio(claimed, ratio),
                          f"{claimed:g} times would take a plain key of {claimed * mapped['bytes_per_item']:.0f} B "
                          f"per item or a map item of {plain['bytes_per_item'] / claimed:.1f} B; a plain key costs "
                          f"{plain['bytes_per_item']:.1f} B on this server")


def _container_trends(doc: dict[str, Any], server: str) -> list[Any]:
    """Seed 003's curves on one server: per container, its read-only points (containers.findings.Trend)."""
    from densekv.tools.lab.containers.findings import trends

    return [t for t in trends(r for r in doc["runs"] if r["kind"] == "containers" and r["server"] == server)
            if len(t.points) >= 2]


def _containers_verdicts(doc: dict[str, Any], server: str) -> Iterable[Verdict]:
    """One verdict per container: the seed's falls / flat against the one its points give."""
    from densekv.tools.lab.containers.findings import FALLS

    for t in _container_trends(doc, server):
        words = "falls off" if t.seed == "falls" else "stays flat"
        need = (f"falling takes more than {FALLS:.0%} of the capacity lost by N = {t.points[-1].n:,}"
                if t.seed == "falls" else f"flat allows at most {FALLS:.0%} of the capacity lost")
        yield Verdict("003", "containers", server, f"that {t.label} {words} as stored sessions grow ({t.seed_says})",
                      f"{t.verdict}, {t.evidence}", "confirmed" if t.agrees else "differs", need)


def headline(doc: dict[str, Any]) -> list[str]:
    """The summary as short terminal lines (one per kind and server; one per container)."""
    from densekv.tools.lab.containers.findings import trend_line

    lines = []
    several = len(doc["servers"]) > 1
    for a in advice(doc):
        where = f"{a.server}: " if several else ""
        measure = f"; {a.measure}" if a.measure else ""
        lines.append(f"{where}{a.what}: {a.chosen} {a.chosen_bytes:,.1f} B/{a.unit} against "
                     f"{a.plain} {a.plain_bytes:,.1f} ({a.saving:.0%} less{measure})")
    for server in _servers(doc):
        where = f"{server}: " if several else ""
        lines += [f"{where}containers: {trend_line(t)}" for t in _container_trends(doc, server)]
    return lines
