"""Where a Flask request's session time goes, densekv against Flask-Session (issue 22: the
end-to-end Miss of Flask with SESSION_REFRESH_EACH_REQUEST=False).

One process per server builds the two apps of `web_sessions.py --parts e2e` (web_peers.
flask_app, SESSION_REFRESH_EACH_REQUEST=False): densekv's SessionInterface with a dictionary
trained on P1 sessions, and Flask-Session 0.8 on the same server. Through each app's own
write path it seeds SEEDED P1 sessions plus the e2e mix's one-key write ({"n": ...}, which
takes a P1 record past 64 bytes: split). Then it times GET /get/_auth_user_id called
straight into the WSGI app (no HTTP server, no test client), client CPU per request
(time.process_time over --requests requests per turn, --rounds interleaved turns, medians),
for four apps:

  peer          Flask-Session as configured: GET session:<sid> + msgspec decode
  densekv       densekv as shipped: store.get (the split read, the payload decode)
  transport     densekv's integration with store.get replaced by one redis-py HGET of the
                session's own record field, returning the session read before the turn:
                the integration and a round trip, no densekv read path and no decode
  +decode       transport plus PayloadCodec.decode of that session's own framed payload
                as stored (the key table's codes since stop 42; before, inflate with the
                4 KiB dictionary; then msgpack with the ext hook)
  +decode x2    +decode with the same decode run twice: what a decode costs once the
                first has warmed the caches, inside the same request
  +zstd         transport plus the decode of the same packed payload framed by the store's
                zstd codec with the same dictionary instead (which densekv's writes pick
                only where it is smaller): what the other codec would cost to read, beside
                its bytes (`payload_bytes`)

So densekv - peer splits into (transport - peer) the integration, (+decode - transport) the
payload decode, and (densekv - +decode) densekv's read path beyond a plain HGET. Each step
is timed inside a request, between Flask's own work, which is where it costs more than in
a loop of gets (benchmarks/hot_path.py): the "tight" figures beside them are the same get
and decode timed back to back.

Records: one JSON object per server (benchmarks/results/flask_request_parts.jsonl).

Usage: python benchmarks/flask_request_parts.py [--servers valkey-9.1,redis-7.0]
       [--rounds 21] [--requests 500] [--out FILE | --no-save]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
import redis
import web_peers  # benchmarks/web_peers.py: the apps web_sessions.py serves
from records import emit  # benchmarks/records.py: print and append each record
from werkzeug.test import EnvironBuilder

import densekv
from densekv import SessionStore
from densekv.codec import BYTES, Codec
from densekv.codec import decode as codec_decode
from densekv.integrations.flask import SessionInterface
from densekv.sessions.layouts.partitioned import cont_field
from densekv.sessions.model import digest_of
from densekv.sessions.payload import pack_data
from densekv.sessions.record import unpack_record, with_rest
from densekv.tools.lab.session_profiles import session

RESULTS = Path(__file__).parent / "results" / "flask_request_parts.jsonl"
TTL = 14 * 86_400
SEEDED = 300
TRAIN_N = 2000
PATH = "/get/_auth_user_id"


def _ok(status: str, headers: Any, exc_info: Any = None) -> None:
    if not status.startswith("200"):
        raise AssertionError(f"GET {PATH} answered {status}")


class Timed:
    """A WSGI app and the environs of its seeded sessions' GET requests."""

    def __init__(self, app: Any, cookies: list[str]) -> None:
        self.app = app
        self.environs = [EnvironBuilder(path=PATH, headers={"Cookie": f"{web_peers.COOKIE}={c}"}).get_environ()
                         for c in cookies]

    def turn(self, n: int) -> float:
        """Client CPU per request (us) over n requests."""
        app, envs = self.app, self.environs
        start = time.process_time()
        for i in range(n):
            b"".join(app(dict(envs[i % len(envs)]), _ok))
        return (time.process_time() - start) / n * 1e6


def seed(app: Any, rng: random.Random) -> list[str]:
    browser = web_peers.FlaskBrowser(app)
    cookies = []
    for i in range(SEEDED):
        cookie = browser.seed(session("P1", i)[1])
        browser.client.post("/seed", json={"n": rng.randint(1, 10**6)},
                            headers={"Cookie": f"{web_peers.COOKIE}={cookie}"})
        cookies.append(cookie)
    return cookies


def own_parts(client: redis.Redis, store: SessionStore, token: str) -> tuple[bytes, bytes, bytes, bool]:
    """(hash key, field, framed payload, whether it is split) of a stored session, read
    with plain commands."""
    layout = store._core_or_none().layout  # noqa: SLF001  # the benchmark reads the layout's own names
    digest = digest_of(token)
    assert digest is not None
    p, field = layout.locate(digest)
    key = layout.hash_key(p)
    rec = unpack_record(digest, client.hget(key, field))
    split = rec.outside and rec.part is not None
    if split:  # the continuation field beside the record (0.1: the continuation hash)
        rest = client.hget(key, cont_field(field, layout.bits)) if rec.here else client.hget(layout.cont_key(p), field)
        rec = with_rest(rec, rest)
    assert rec.payload is not None, "a seeded session has a payload"
    return key, field, rec.payload, split


def measure(server: str, rounds: int, requests: int) -> dict[str, Any]:
    with densekv.embedded(server) as srv:
        url = srv.url
        client = redis.Redis.from_url(url)
        SessionStore(client, namespace="sess", expected_sessions=10_000, ttl=TTL).train_dictionary(
            [session("P1", i)[1] for i in range(SEEDED, SEEDED + TRAIN_N)])
        interface = SessionInterface.from_url(url, namespace="sess", expected_sessions=10_000, ttl=TTL)
        ours = web_peers.flask_app(interface, TTL, refresh=False)
        peer_interface = web_peers.flask_session_app(redis.Redis.from_url(url), TTL).session_interface
        peer = web_peers.flask_app(peer_interface, TTL, refresh=False)
        rng = random.Random(22)
        ours_cookies, peer_cookies = seed(ours, rng), seed(peer, rng)
        store = interface.store
        real_get = store.get
        found = {t: real_get(t, undecodable="none") for t in ours_cookies}
        parts = {t: own_parts(client, store, t) for t in ours_cookies}
        core = store._core_or_none()  # noqa: SLF001  # the benchmark reads the store's own codec
        splits = sum(1 for t in ours_cookies if parts[t][3])
        codec = core.payloads.codec
        plain = redis.Redis.from_url(url)

        def transport(token: str, undecodable: str = "raise") -> Any:
            key, field, _, _ = parts[token]
            plain.hget(key, field)
            return found[token]

        def with_decode(token: str, undecodable: str = "raise") -> Any:
            key, field, payload, _ = parts[token]
            plain.hget(key, field)
            codec.decode(payload, key=None)
            return found[token]

        assert codec.dictionary is not None, "the store adopted the trained dictionary"
        zstd = Codec("raw", "zstd", level=9, dictionary=codec.dictionary)
        deflate = Codec("raw", "zlib", level=9, dictionary=codec.dictionary)
        # the msgpack form of each stored session (stored table-coded, deflated or zstd'd)
        packed = {t: pack_data(codec.decode(parts[t][2], key=None)) for t in ours_cookies}
        # each codec's own framing, even where it is longer than the other or than no compression
        zstd_framed = {t: zstd._compress(BYTES, packed[t]) for t in ours_cookies}  # noqa: SLF001
        payload_bytes = {"stored": round(median(len(parts[t][2]) for t in ours_cookies), 1),
                         "deflate": round(median(len(deflate._compress(BYTES, p)) for p in packed.values()), 1),  # noqa: SLF001
                         "zstd": round(median(len(z) for z in zstd_framed.values()), 1)}

        def decode_twice(token: str, undecodable: str = "raise") -> Any:
            key, field, payload, _ = parts[token]
            plain.hget(key, field)
            codec.decode(payload, key=None)
            codec.decode(payload, key=None)
            return found[token]

        def with_zstd(token: str, undecodable: str = "raise") -> Any:
            key, field, _, _ = parts[token]
            plain.hget(key, field)
            codec_decode(zstd_framed[token], key=None, dictionaries=codec.known)
            return found[token]

        gets = {"densekv": real_get, "transport": transport, "+decode": with_decode,
                "+decode x2": decode_twice, "+zstd": with_zstd}
        apps = {"peer": Timed(peer, peer_cookies), **{name: Timed(ours, ours_cookies) for name in gets}}

        def turn(name: str, n: int) -> float:
            if name in gets:
                store.get = gets[name]  # type: ignore[method-assign]  # the instance's own attribute
            return apps[name].turn(n)

        for name in apps:  # warm every path once
            turn(name, 200)
        per: dict[str, list[float]] = {name: [] for name in apps}
        names = list(apps)
        for r in range(rounds):
            for name in (names if r % 2 else names[::-1]):
                per[name].append(turn(name, requests))
        store.get = real_get  # type: ignore[method-assign]

        peer_key = [b"session:" + c.encode() for c in peer_cookies]
        import msgspec  # Flask-Session's own serializer

        decoder = msgspec.msgpack.Decoder()

        def tight_ours(n: int) -> float:
            start = time.process_time()
            for i in range(n):
                real_get(ours_cookies[i % SEEDED], undecodable="none")
            return (time.process_time() - start) / n * 1e6

        def tight_peer(n: int) -> float:
            start = time.process_time()
            for i in range(n):
                decoder.decode(plain.get(peer_key[i % SEEDED]))
            return (time.process_time() - start) / n * 1e6

        def tight_decode(n: int) -> float:
            payloads = [parts[t][2] for t in ours_cookies]
            start = time.process_time()
            for i in range(n):
                codec.decode(payloads[i % SEEDED], key=None)
            return (time.process_time() - start) / n * 1e6

        tight: dict[str, list[float]] = {"store.get": [], "GET + msgspec": [], "decode": []}
        for _ in range(rounds):
            tight["store.get"].append(tight_ours(requests))
            tight["GET + msgspec"].append(tight_peer(requests))
            tight["decode"].append(tight_decode(requests * 4))
        med = {name: round(median(v), 1) for name, v in per.items()}
        tmed = {name: round(median(v), 2) for name, v in tight.items()}
        return {
            "benchmark": "flask_request_parts", "commit": gitstamp.commit(), "server": server,
            "version": client.info("server").get("valkey_version") or client.info("server")["redis_version"],
            "framework": "flask-norefresh", "profile": "P1 + one key (e2e mix)", "seeded": SEEDED,
            "split_sessions": splits, "rounds": rounds, "requests": requests,
            "request_cpu_us": med, "ratio_densekv_peer": round(med["densekv"] / med["peer"], 3),
            "integration_us": round(med["transport"] - med["peer"], 1),
            "decode_us": round(med["+decode"] - med["transport"], 1),
            "read_path_us": round(med["densekv"] - med["+decode"], 1),
            "second_decode_us": round(med["+decode x2"] - med["+decode"], 1),
            "zstd_decode_us": round(med["+zstd"] - med["transport"], 1),
            "payload_bytes_median": payload_bytes,
            "tight_us": tmed, "load_average_1m": round(os.getloadavg()[0], 2),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default="valkey-9.1,redis-7.0")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    for server in args.servers.split(","):
        emit(measure(server, args.rounds, args.requests), None if args.no_save else args.out)


if __name__ == "__main__":
    sys.exit(main())
