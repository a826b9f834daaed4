"""`densekv analyze` on a live server prints no token, and every report works on a keyspace
with patterns densekv has no layout for (issue 32, parts 2 and the --html crash).

The keyspace mixes the token families of tests/unit/test_analyze_tokens.py (a few
thousand of each rather than 10^5: the unit test covers the grouping at full size, this
one every output: terminal, --json, --html and the --resume file) with ordinary names and
a list, a sorted set and a stream, which densekv leaves as they are.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from densekv.tools.server.process import ServerProcess

SEED = 3232
B62 = string.ascii_letters + string.digits


def _b64url(rng: random.Random, n: int) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(n)).rstrip(b"=").decode()


FAMILIES: dict[str, tuple[int, Callable[[random.Random], str], str]] = {
    "flask-session": (3000, lambda rng: _b64url(rng, 32), "session:{}"),
    "densekv": (3000, lambda rng: _b64url(rng, 24), "sess:{}:data"),
    "uuid": (1500, lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)), "job:{}"),
    "hex-digest": (1500, lambda rng: hashlib.sha256(rng.randbytes(16)).hexdigest(), "cache:views.GET.{}.en-us"),
    "base62": (1500, lambda rng: "".join(rng.choices(B62, k=22)), "link/{}"),
}
ORDINARY = ("user:{n}:visits", "leaderboard:weekly", "queue:jobs", "events", "someCamelCaseIdentifier")


@pytest.fixture(scope="module")
def keyspace() -> Iterator[tuple[ServerProcess, set[str]]]:
    """A server holding the tokens' keys and the ordinary ones; the set of tokens."""
    from densekv.tools.server.binaries import find_servers

    present = find_servers()
    if "valkey-9.1" not in present:
        pytest.skip("needs valkey-9.1")
    rng = random.Random(SEED)
    tokens: set[str] = set()
    proc = ServerProcess(present["valkey-9.1"]).start()
    with proc.client() as c:
        pipe = c.pipeline(transaction=False)
        for n, make, fmt in FAMILIES.values():
            for _ in range(n):
                token = make(rng)
                tokens.add(token)
                if fmt.startswith("job:"):
                    pipe.hset(fmt.format(token), mapping={"state": "done", "tries": 1})
                else:
                    pipe.set(fmt.format(token), json.dumps({"_user_id": str(rng.randrange(10**6))}), ex=86400)
        for i in range(1000):
            pipe.incrby(f"user:{i}:visits", rng.randrange(1, 500))
        pipe.zadd("leaderboard:weekly", {f"player{i}": i for i in range(200)})
        pipe.rpush("queue:jobs", *[f"job{i}" for i in range(50)])
        pipe.xadd("events", {"kind": "login"})
        pipe.set("someCamelCaseIdentifier", "x")
        pipe.execute()
    yield proc, tokens
    proc.stop()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "densekv.tools.cli", "analyze", *args], capture_output=True,
                          text=True, timeout=300, check=False)


def _leaks(text: str, tokens: set[str]) -> list[str]:
    """Tokens in `text`, whole or as any 12-character piece of one."""
    pieces = {t[i: i + 12] for t in tokens for i in range(0, len(t) - 11, 4)}
    runs = re.findall(r"[A-Za-z0-9_-]{12,}", text)
    return [r for r in runs if r in tokens or any(r[i: i + 12] in pieces for i in range(len(r) - 11))]


def test_no_output_holds_a_token(keyspace: tuple[ServerProcess, set[str]], tmp_path: Path) -> None:
    proc, tokens = keyspace
    resume = tmp_path / "scan.json"
    out = _cli("--url", proc.url, "--sample", "3000", "--replay-keys", "100", "--json", "--html", str(tmp_path),
               "--resume", str(resume))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    names = {r["pattern"] for r in doc["patterns"]}
    assert {"session:{tok}", "sess:{tok}:data", "job:{uuid}", "cache:views.GET.{hex}.en-us", "link/{tok}",
            *ORDINARY} == names
    page = (tmp_path / "analyze.html").read_text()
    assert "queue:jobs" in page and "no densekv layout to measure" in page  # the row --html crashed on
    terminal = _cli("--url", proc.url, "--full", "--no-replay")
    assert terminal.returncode == 0, terminal.stderr
    assert "someCamelCaseIdentifier" in terminal.stdout and "user:{n}:visits" in terminal.stdout
    outputs = {"json": out.stdout, "html": page, "resume": resume.read_text(), "terminal": terminal.stdout,
               "stderr": out.stderr + terminal.stderr}
    assert {k: _leaks(v, tokens)[:3] for k, v in outputs.items()} == {k: [] for k in outputs}, f"seed {SEED}"


def test_a_resume_file_goes_on_from_its_names_file(keyspace: tuple[ServerProcess, set[str]],
                                                    tmp_path: Path) -> None:
    """The key names the resume file leaves out come back from FILE.names (0600): a
    finished resume file gives the same report again; a missing names file is one line."""
    proc, tokens = keyspace
    resume = tmp_path / "scan.json"
    names = Path(f"{resume}.names")
    first = _cli("--url", proc.url, "--sample", "2000", "--no-replay", "--json", "--resume", str(resume))
    again = _cli("--url", proc.url, "--sample", "2000", "--no-replay", "--json", "--resume", str(resume))
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    rows = [{r["pattern"]: r["keys"] for r in json.loads(o.stdout)["patterns"]} for o in (first, again)]
    assert rows[0] == rows[1]
    assert oct(names.stat().st_mode & 0o777) == "0o600"
    assert _leaks(names.read_text(), tokens), "the names file is where the key names went"
    assert not _leaks(resume.read_text(), tokens), f"seed {SEED}"
    names.unlink()
    lost = _cli("--url", proc.url, "--sample", "2000", "--no-replay", "--resume", str(resume))
    assert lost.returncode == 2 and "is missing" in lost.stderr and len(lost.stderr.strip().splitlines()) == 1
