"""A worker process of one limited session store, driven over stdin/stdout (one JSON
object a line each way), for tests that need real separate processes on one namespace
(tests/behaviour/test_session_lifecycle_faults.py).

    python -m tests.behaviour.limit_worker URL NAMESPACE LIMIT IDLE_TTL

URL: redis://... or redis+cluster://... (densekv.connect.from_url). Every request carries
`now`, the unix second the worker's clock reads for that operation (the test keeps the
workers' clocks in step). Requests: {"op": "create", "identity": i}, {"op": "login",
"token": t, "identity": i}, {"op": "touch", "token": t}, {"op": "live", "token": t},
{"op": "ids", "identity": i} (sessions_of's ids), {"op": "events"} (what its observer saw
since the last ask: [kind, cause, session id]), {"op": "exit"}. Answer: {"ok": result} or
{"error": "Type: message"}.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from densekv.connect import from_url
from densekv.sessions import SessionStore
from densekv.sessions.events import SessionEvent


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Seen:
    def __init__(self) -> None:
        self.events: list[list[str]] = []

    def on_event(self, event: SessionEvent) -> None:
        self.events.append([event.kind, event.cause, event.session_id])


def main(url: str, namespace: str, limit: int, idle_ttl: int) -> None:
    clock = Clock()
    client = from_url(url)
    store = SessionStore(client, namespace, layout="dense", ttl=100_000, idle_ttl=idle_ttl,
                         max_sessions_per_identity=limit, clock=clock)
    seen = Seen()
    store.observe(seen)
    ops: dict[str, Any] = {
        "create": lambda r: store.create(r["identity"]),
        "login": lambda r: store.login(r["token"], r["identity"]),
        "touch": lambda r: store.touch(r["token"]),
        "live": lambda r: store.get(r["token"]) is not None,
        "ids": lambda r: sorted(s.id for s in store.sessions_of(r["identity"])),
    }
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "exit":
            break
        try:
            if request["op"] == "events":
                result: Any = seen.events
                seen.events = []
            else:
                clock.now = float(request["now"])
                result = ops[request["op"]](request)
            answer = {"ok": result}
        except Exception as exc:  # noqa: BLE001 - the test reads it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
