"""Where the bytes of a stored session go (issue 30, section 2: "measure, per profile, where the
bytes of a record go ... and cut what is not information"), and how many sessions fit one
listpack value.

Per profile (P0 anonymous, P1 Django login, P1n = P1 plus the key "n" the e2e mix
writes (1..10**6, session_profiles.django_login_written), P1w = P1 stored, then that key
written into each by a store that never trains its dictionary again (auto_train=None): the
key unseen by the dictionary, P1a = the same writes by a store as made by default, whose
look at its dictionary's fit (densekv/sessions/payload_flows.py, refit) trains another
along the way, P1r = P1w after `store.train_dictionary()` (trained again on the stored
sessions) and one more write of each, P2 Flask-Login, P3 shop), one fresh server: a SessionStore(layout="dense",
ttl 30 days, and idle_ttl 2 days where --idle) sized for --n sessions, its dictionary
trained on the first 2,000 sessions' data (as web_sessions.py and the store's auto_train
do), --n sessions stored by create_each; then every partition hash is read back (HGETALL)
and each session's bytes are taken apart by the record format (densekv/sessions/record.py)
and the payload framing (densekv/sessions/payload.py, densekv/codec.py):

  field        the record's field name (the digest's bytes the partition number leaves)
  flags        1                     expiry      4 (expires_at)
  absolute     4 with an idle ttl    identity    its bytes and a length byte if > 14
  codec        1 (the framing byte: 0x01 plain, 0x21 zstd, 0x51 deflate, 0x61 the key table)
  dict_ref     the dictionary id's varint (a content id: 4 bytes; 0 without one)
  body         the packed or compressed payload itself
  split        1 (the marker 0x0C) + the continuation field's name, when split
  listpack     each hash entry's element headers and back-lengths (2 elements an entry:
               2 bytes each for a string under 64 bytes), for the record and, when split,
               the continuation
  out_of_line  sessions whose payload went to a key of its own (counted, not taken apart:
               the key costs what a string key costs, docs/sessions.md)

It reports the share of sessions that are inline (one value), split (two) and out of line,
and, from the same records, the share that would be inline if the dictionary reference
cost one byte instead of its varint (`inline_if_ref_1b`: the counterfactual the issue asks
about, computed, not stored). Byte figures are means per session over the sessions of
that kind. No server CPU or memory is timed here: bytes per session on the server are
web_sessions.py --parts memory's.

Records: benchmarks/results/record_bytes.jsonl (records.emit), one per (server, profile).

Usage: python benchmarks/record_bytes.py [--n 20000] [--servers valkey-9.1,redis-7.0]
       [--profiles P0,P1,P1n,P1w,P1a,P1r,P2,P3] [--idle] [--no-save]
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
from records import emit

from densekv.dictionaries import dictionary_key
from densekv.sessions import SessionStore
from densekv.sessions.layouts.partitioned import cont_field, is_cont_field
from densekv.sessions.payload_flows import AUTO_TRAIN
from densekv.tools.lab.session_profiles import NAMES, django_login_written, session
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

OUT = Path(__file__).parent / "results" / "record_bytes.jsonl"
PROFILES = ("P0", "P1", "P1n", "P1w", "P1a", "P1r", "P2", "P3")
WRITTEN = ("P1w", "P1a", "P1r")  # P1 stored, then "n" written into each
TRAIN_N = 2000
TTL, IDLE = 30 * 86400, 2 * 86400
SPLIT_HERE, SPLIT_OLD, OUT_OF_LINE = 0x0C, 0x0D, 0x0F


def profile_session(profile: str, n: int) -> tuple[int | None, dict[str, Any]]:
    """Session n of a profile; P1n is P1 after the e2e mix's one-key write."""
    if profile == "P1n":
        return django_login_written(n)
    return session(profile, n)


def varint_len(data: bytes, pos: int) -> int:
    n = 0
    while pos + n < len(data) and data[pos + n] & 0x80:
        n += 1
    return n + 1


def element_overhead(size: int) -> int:
    """A listpack string element's header and back-length bytes (listpack.c lpEncodeString)."""
    header = 1 if size < 64 else 2 if size < 4096 else 5
    total = header + size
    back = 1 if total < 128 else 2 if total < 16384 else 3 if total < 2097152 else 4
    return header + back


def taken_apart(field: bytes, raw: bytes, rest: bytes | None, cont: bytes = b"") -> tuple[str, dict[str, int], str]:
    """(kind, bytes by part, codec) of one stored session: kind inline, split or
    out_of_line; codec plain, zstd, deflate, table or "" (no payload, or out of line)."""
    flags = raw[0]
    pos = 5
    parts = {"field": len(field), "flags": 1, "expiry": 4, "absolute": 0, "identity": 0,
             "codec": 0, "dict_ref": 0, "body": 0, "split": 0,
             "listpack": element_overhead(len(field)) + element_overhead(len(raw))}
    if flags & 0x20:
        parts["absolute"], pos = 4, 9
    ident = flags & 0x0F
    if ident == 0x0F:
        ident = raw[pos] + 1
    parts["identity"] = ident
    pos += ident
    if not flags & 0x80 or pos >= len(raw):
        return "inline", parts, ""
    framed = raw[pos:]
    kind = "inline"
    if framed[0] == OUT_OF_LINE:
        parts["split"] = 1
        return "out_of_line", parts, ""
    if framed[0] in (SPLIT_HERE, SPLIT_OLD):
        if rest is None:
            raise AssertionError("a split record without its continuation")
        kind = "split"
        named = len(field) + (1 if len(cont) > len(field) else 0)  # cont_field: the field, + a 0 byte where bits % 8 == 0
        parts["split"] = 1 + (named if framed[0] == SPLIT_HERE else 0)
        parts["listpack"] += element_overhead(named) + element_overhead(len(rest))
        framed = framed[1:] + rest
    parts["codec"] = 1
    if framed[0] & 0xF0 in (0x20, 0x50, 0x60):
        parts["dict_ref"] = varint_len(framed, 1)
    parts["body"] = len(framed) - 1 - parts["dict_ref"]
    return kind, parts, {0x20: "zstd", 0x50: "deflate", 0x60: "table"}.get(framed[0] & 0xF0, "plain")


def measure(server: str, profile: str, n: int, idle: bool) -> dict[str, Any]:
    with ServerProcess(find_servers()[server]) as proc:
        client = proc.client()
        store = SessionStore(client, namespace="sess", layout="dense", expected_sessions=n, ttl=TTL,
                             idle_ttl=IDLE if idle else None,
                             auto_train=None if profile in ("P1w", "P1r") else AUTO_TRAIN)
        stored = "P1" if profile in WRITTEN else profile
        store.train_dictionary([profile_session(stored, i)[1] for i in range(min(n, TRAIN_N))])
        made = (profile_session(stored, i) for i in range(n))
        tokens: list[str] = []
        while batch := list(itertools.islice(made, 1000)):
            tokens += store.create_each(batch, batch=len(batch))
        if profile in WRITTEN:  # the e2e's sessions after its writes: "n" unseen by the dictionary
            for i, token in enumerate(tokens):
                store.apply(token, {"n": profile_session("P1n", i)[1]["n"]})
        if profile == "P1r":  # then a dictionary trained again on the stored sessions, and each written once more
            store.train_dictionary()
            for i, token in enumerate(tokens):
                store.apply(token, {"n": profile_session("P1n", i)[1]["n"] + 1})
        explained = store.explain()
        limit, bits = int(explained["hash_max_listpack_value"]), int(explained["partitions"]).bit_length() - 1
        kinds: Counter[str] = Counter()
        sums: dict[str, Counter[str]] = {}
        codecs: Counter[str] = Counter()
        fits_ref_1b = 0
        for key in client.scan_iter(match=b"sess:sd:*", count=1000):
            entries = client.hgetall(key)
            for field, raw in entries.items():
                if is_cont_field(field, bits):  # a continuation field, read with its record
                    continue
                cont = cont_field(field, bits)
                kind, parts, codec = taken_apart(field, raw, entries.get(cont), cont)
                kinds[kind] += 1
                sums.setdefault(kind, Counter()).update(parts)
                if codec:
                    codecs[codec] += 1
                whole = sum(parts[p] for p in ("flags", "expiry", "absolute", "identity", "codec",
                                               "dict_ref", "body"))
                if kind != "out_of_line" and whole - max(0, parts["dict_ref"] - 1) <= limit:
                    fits_ref_1b += 1
        total = sum(kinds.values())
        dictionaries = client.hlen(dictionary_key("sess"))  # trained by the store itself beside the first
    means = {kind: {p: round(v / kinds[kind], 2) for p, v in sorted(c.items())} for kind, c in sums.items()}
    return {"profile": profile, "profile_name": NAMES.get(profile, {"P1n": "django_login plus n", "P1w": "django_login, n written",
                "P1a": "django_login, n written, the store's refit on"}.get(
                profile, "django_login, n written, dictionary trained again")), "n": total,
            "dictionaries": dictionaries,
            "idle_ttl": IDLE if idle else None, "hash_max_listpack_value": limit,
            "inline_share": round(kinds["inline"] / total, 4), "split_share": round(kinds["split"] / total, 4),
            "out_of_line_share": round(kinds["out_of_line"] / total, 4),
            "inline_if_ref_1b": round(fits_ref_1b / total, 4),
            "codecs": dict(codecs), "bytes_by_part": means}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--servers", default="valkey-9.1,redis-7.0")
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--idle", action="store_true", help="stores with an idle ttl (records carry absolute_at)")
    ap.add_argument("--no-save", action="store_true", help="print only")
    args = ap.parse_args()
    commit = gitstamp.commit()
    for server in args.servers.split(","):
        for profile in args.profiles.split(","):
            if profile not in PROFILES:
                raise SystemExit(f"profile is one of {', '.join(PROFILES)}")
            emit({"benchmark": "record_bytes", "commit": commit, "server": server,
                  **measure(server, profile, args.n, args.idle)}, None if args.no_save else OUT)


if __name__ == "__main__":
    main()
