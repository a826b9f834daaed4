"""The apply (write) path was made cheaper per call (issue 22): it must still store the very
bytes it stored before. The encoder of commit f85c856 (before that work) is run in a child
process from `git archive` of that commit and given the same sessions: packed payloads,
framed payloads (the codec choice over a sequence of writes included: the probing and the
leader), records, and the commands plan_put / plan_replace send must be equal, byte for
byte. Skipped where the checkout has no git history (an sdist).

Since 0.2 a split payload's rest is a continuation field beside its record (issue 30): the
commands are compared for layouts made with here=False, the 0.1.0 format still written for
stores made by 0.1.0, and hrec_update's ARGV as 0.1.0 sent them (today's always sends
ARGV[8..9], "" for no new expiries, and adds ARGV[10..11]). The stored bytes of records and
payloads are unchanged; the continuation field's commands are tested against a server
(tests/behaviour/test_sessions.py)."""

from __future__ import annotations

import io
import os
import pickle
import random
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

REFERENCE = "f85c856"  # the last commit before the apply path was trimmed
REPO = Path(__file__).resolve().parents[2]

# Run as-is in this process and in the child (whose densekv is the reference tree).
COMPUTE = r'''
def compute(datas, dict_bytes):
    from densekv.codec import ZstdDictionary
    from densekv.plan import ScriptCall
    from densekv.sessions.layouts.base import LayoutLimits
    from densekv.sessions.layouts.partitioned import DenseLayout, ZsetLayout
    from densekv.sessions.model import Record
    from densekv.sessions.payload import PayloadCodec
    try:
        from densekv.errors import SessionDataInvalid, SessionDataTooLarge
    except ImportError:  # the reference tree, from before the errors moved to densekv.errors
        from densekv.sessions.payload import SessionDataInvalid, SessionDataTooLarge
    from densekv.sessions.record import pack_record

    def steps(plan):
        out = []
        for s in plan.steps:
            if isinstance(s, ScriptCall):
                # the script by name: its text may be trimmed (benchmarks/lua_scripts.py);
                # its KEYS/ARGV contract is what the stored bytes depend on
                args = tuple(s.args)
                if s.script.name == "hrec_update" and len(args) == 11:  # today's ARGV, as 0.1.0 sent it
                    args = args[:7] + (args[7:9] if args[7:9] != (b"", b"") else ())
                out.append(("script", s.script.name, tuple(s.keys), args))
            else:
                out.append(("command", tuple(s.args), tuple(s.keys)))
        return out, plan.atomic

    out = []
    plain = PayloadCodec()
    coded = PayloadCodec(300_000)
    coded.use(ZstdDictionary.of(dict_bytes))
    small = PayloadCodec(200)
    import inspect
    old = {"here": False} if "here" in inspect.signature(DenseLayout).parameters else {}  # 0.1's format
    layouts = [DenseLayout("ns", 32, LayoutLimits(hash_max_listpack_value=64), **old),
               ZsetLayout("zs", 4096, LayoutLimits(hash_max_listpack_value=300), **old),
               ZsetLayout("rp", 1024, LayoutLimits(hash_max_listpack_value=128), base_partitions=64, **old)]
    for i, data in enumerate(datas):
        row = []
        for codec in (plain, coded, small):
            try:
                row.append(codec.encode(data))
            except (SessionDataInvalid, SessionDataTooLarge) as exc:
                row.append(type(exc).__name__)
        framed = row[1][1] if isinstance(row[1], tuple) else None
        digest = bytes((i * 37 + j) % 256 for j in range(16))
        identity = [None, i, f"user-{i}", 2**40 + i][i % 4]
        times = (1_900_000_000 + i, 1_900_000_000 + i + (i % 3) * 100)
        rec = Record(digest, identity, times[0], times[1], None, framed)
        row.append(pack_record(rec, framed))
        old = Record(digest, identity, times[0], times[1], None, None, raw=b"old" + digest,
                     ool=(b"rest" if i % 5 == 0 else None))
        for layout in layouts:
            try:
                row.append(steps(layout.plan_put(rec, 1_800_000_000)))
            except SessionDataTooLarge as exc:
                row.append(type(exc).__name__)
            row.append(steps(layout.plan_replace(digest, old if i % 2 else None, None, framed,
                                                 1_800_000_000 + i, times if i % 3 == 0 else None)))
        out.append(row)
    return out
'''


def _datas() -> list[Any]:
    from densekv.tools.lab.session_profiles import session

    datas: list[Any] = [session(p, i)[1] for p in ("P0", "P1", "P2", "P3") for i in range(60)]
    datas += [
        {}, {"a": None, "b": True, "c": False, "d": -1, "e": 2**64 - 1, "f": -(2**63), "g": 1.5},
        {"csrf": "ab" * 20, "HEX": "AB" * 20, "b64": "SGVsbG8gV29ybGQhIQ", "b64odd": "SGVsbG8gV29ybGQhI",
         "uuid": "12345678-1234-5678-1234-567812345678", "UUID": "12345678-1234-5678-1234-56781234567A"},
        {"ünï": "cödé ✓", "bytes": b"\x00\x01\xff" * 30, "list": [1, "x" * 70, [2, {"k": "v"}]]},
        {"deep": [[[[{"x": [1, 2, {"y": "0123456789abcdef" * 4}]}]]]]},
        {"big": "lorem ipsum dolor " * 400},  # over `small`'s 200 bytes, out of line with 64
        {"bad": (1, 2)}, {"nan": float("nan")}, {1: "int key"}, {"surrogate": "\udc80"},
    ]
    # the same session changing one key, as apply writes it; among them values that repeat
    # past deflate's 32 KiB window, where zstd wins: the probed writes move the leader
    block = random.Random(22).randbytes(36_000)
    for i in range(120):
        datas.append({**session("P1", 3)[1], "_auth_user_hash": f"{i:064x}"})
        if 40 <= i < 80:
            datas.append({"repeats": block + bytes([i]) + block})
    return datas


def _dictionary(datas: list[Any]) -> bytes:
    import msgpack

    return b"".join(msgpack.packb(d, use_bin_type=True) for d in datas[:80] if d)[:4096]


def _reference_tree(tmp_path: Path) -> Path:
    try:
        tar = subprocess.run(["git", "-C", str(REPO), "archive", REFERENCE, "densekv"],
                             capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip(f"no git history with commit {REFERENCE} in this checkout")
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path


def test_stored_bytes_are_those_of_the_reference_encoder(tmp_path: Path) -> None:
    datas = _datas()
    dict_bytes = _dictionary(datas)
    tree = _reference_tree(tmp_path)
    child = (COMPUTE + "\nimport pickle, sys\nargs = pickle.loads(sys.stdin.buffer.read())\n"
             "import densekv\nassert densekv.__file__.startswith(sys.argv[1]), densekv.__file__\n"
             "sys.stdout.buffer.write(pickle.dumps(compute(*args)))\n")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", child, str(tree)], input=pickle.dumps((datas, dict_bytes)),
                          capture_output=True, env=env, cwd=tree, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    expected = pickle.loads(done.stdout)  # our own child's output
    scope: dict[str, Any] = {}
    exec(COMPUTE, scope)  # noqa: S102  # the same source as the child's
    got = scope["compute"](datas, dict_bytes)
    assert len(got) == len(expected) == len(datas)
    for data, mine, theirs in zip(datas, got, expected):
        assert mine == theirs, f"stored bytes changed for {data!r:.200}"
    framed = [row[1] for row in got if isinstance(row[1], tuple)]
    assert {f[1][0] for f in framed} >= {0x01, 0x51}  # plain and deflate both written


def test_replace_names_the_keys_of_each_partition_past_its_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """plan_replace keeps its key names per partition, a few at most: every plan still names
    the session's own hash, out-of-line key and continuation (and zset), as formatted anew."""
    from densekv.plan import ScriptCall
    from densekv.sessions.layouts import partitioned
    from densekv.sessions.layouts.base import LayoutLimits

    monkeypatch.setattr(partitioned, "_REPLACE_KEYS_MAX", 3)
    rnd = random.Random(5)
    for layout in (partitioned.DenseLayout("ns", 64, LayoutLimits()),
                   partitioned.ZsetLayout("zs", 256, LayoutLimits(), base_partitions=16)):
        for _ in range(300):
            digest = rnd.randbytes(16)
            p = layout.locate(digest)[0]
            (step,) = layout.plan_replace(digest, None, None, b"\x01x", 1, (5, 6)).steps
            assert isinstance(step, ScriptCall)
            zset = (layout.zset_key(p),) if layout.name == "zset" else ()
            assert step.keys == (layout.hash_key(p), layout.ool_key(digest), layout.cont_key(p), *zset)
            assert step.keys[1].endswith(digest)


def test_get_and_put_name_the_keys_of_each_partition_past_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """plan_get and plan_put share that cache; past its size they format the names they
    need per call (the cache is never emptied): every plan names the session's own keys."""
    from densekv.sessions.layouts import partitioned
    from densekv.sessions.layouts.base import LayoutLimits
    from densekv.sessions.model import Record

    monkeypatch.setattr(partitioned, "_REPLACE_KEYS_MAX", 3)
    rnd = random.Random(6)
    for here in (True, False):  # the continuation field (0.2), the continuation hash (0.1)
        layout = partitioned.DenseLayout("ns", 64, LayoutLimits(hash_max_listpack_value=64), here=here)
        for _ in range(300):
            digest = rnd.randbytes(16)
            p = layout.locate(digest)[0]
            hash_key, cont, ool = layout.hash_key(p), layout.cont_key(p), layout.ool_key(digest)
            split_keys = [hash_key] if here else [hash_key, cont]
            for outside, keys in ((False, [hash_key]), ("split", split_keys), ("here", [hash_key]),
                                  ("cont", [hash_key, cont]), ("ool", [hash_key, ool]), (True, [hash_key, cont, ool])):
                assert layout.plan_get(digest, outside=outside).keys() == keys
            split = Record(digest, 7, 2_000_000_000, 2_000_000_000, payload=bytes(range(1, 100)))
            assert layout.plan_put(split, 1).keys() == ([hash_key] if here else [cont, hash_key])
    assert len(layout._names) == 3  # filled to its size, then left as it is
