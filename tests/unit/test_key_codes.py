"""The registry of key-name codes (densekv/keys.py CODES): every code a module of densekv
writes is registered with a description, none is registered that nothing writes, a
retired code stays refused for reuse, and the checked builders give the names the kinds
always wrote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from densekv.keys import CODES, RETIRED, checked, key, tag

ROOT = Path(__file__).resolve().parents[2] / "densekv"

#: How the key builders of densekv name their code, as source text.
BUILDERS = [
    re.compile(r"""\btag\(\s*[^,()]+,\s*f?["']([a-z]+)"""),  # tag(ns, "si", p), tag(ns, f"bf{n}", s)
    re.compile(r"""\bkey\(\s*[^,()]+,\s*f?["']([a-z]+)["']"""),  # key(ns, "meta")
    re.compile(r"""\bkey_at\(\s*["']([a-z]+)["']"""),  # sessions' partitioned layouts
    re.compile(r"""^\s+code = ["']([a-z]+)["']""", re.MULTILINE),  # a layout class's code
    re.compile(r""":([a-z][a-z0-9]*):\{\{"""),  # f"{ns}:zm:{{{ns}}}"
    re.compile(r"""b":([a-z]+):\{"""),  # b":m:{*" (SCAN patterns of what is written)
    re.compile(r"""f["']\{[\w.]+\}:([a-z][a-z0-9]*)["']"""),  # f"{namespace}:meta"
]

#: Codes made by joining parts, which no pattern above sees: where, and how.
INDIRECT = {
    "om": ("maps/buckets.py", 'b":o" + code'),  # the out-of-line key of an `m` bucket's field
    "oh": ("maps/buckets.py", 'b":o" + code'),  # ... of an `h` bucket's field
}


def codes_in_source() -> dict[str, list[str]]:
    """code -> where it is written ("path:line"), over every module of densekv."""
    found: dict[str, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "keys.py" and path.parent == ROOT:
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in BUILDERS:
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.setdefault(m.group(1), []).append(f"{path.relative_to(ROOT)}:{line}")
    return found


def registered(code: str) -> bool:
    return any(c in CODES or c in RETIRED for c in (code, code + "#"))


def test_every_code_written_is_registered() -> None:
    found = codes_in_source()
    assert {"sd", "sj", "m", "zm", "bm", "fm", "meta"} <= set(found)  # the patterns still see them
    missing = {code: where for code, where in found.items() if not registered(code)}
    assert not missing, f"register these codes in densekv/keys.py CODES: {missing}"


def test_every_registered_code_is_written_somewhere() -> None:
    found = set(codes_in_source())
    for code, (module, text) in INDIRECT.items():
        assert text in (ROOT / module).read_text(encoding="utf-8"), (code, module)
        found.add(code)
    stale = [code for code in CODES if code.rstrip("#") not in found]
    assert not stale, f"registered but written nowhere (retire them in RETIRED): {stale}"


def test_entries_say_what_and_who() -> None:
    assert not set(CODES) & set(RETIRED)
    for code, text in {**CODES, **RETIRED}.items():
        assert re.fullmatch(r"[a-z]+#?", code), code
        assert ".py" in text or ".lua" in text, f"{code}: name the module that writes it"


@pytest.mark.parametrize("code", ["sd", "sj", "meta", "m", "h", "h4096", "s1", "dq2592", "ds256",
                                  "f4096", "bf0", "bf12", "bm", "fm", "zd", "probe", "dh16"])
def test_registered_codes_pass(code: str) -> None:
    assert checked(code) == code


@pytest.mark.parametrize("code", ["", "x", "sx", "s", "f", "bf", "dh", "m7", "sd2", "h#", "#", "16",
                                  "s?", "meta1", "H"])
def test_unregistered_codes_are_refused(code: str) -> None:
    with pytest.raises(ValueError, match="not registered"):
        checked(code)
    with pytest.raises(ValueError):
        tag("ns", code, 0)


@pytest.mark.parametrize(("built", "name"), [
    (tag("sess", "sd", 17), b"sess:sd:{17}"),
    (tag("kv", "h4096", "9"), b"kv:h4096:{9}"),
    (tag("jobs", "fm", b"p\xff1"), b"jobs:fm:{p\xff1}"),  # a family's parent is bytes
    (tag("bf", "bf3", 0), b"bf:bf3:{0}"),
    (tag("n\u00e9", "si", 2), "n\u00e9:si:{2}".encode()),
    (key("sess", "meta"), b"sess:meta"),
])
def test_builders_name_keys_as_before(built: bytes, name: bytes) -> None:
    assert built == name
