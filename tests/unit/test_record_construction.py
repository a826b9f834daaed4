"""The session record is built without its dataclass __init__ on the read path
(sessions/record.py unpack_record and with_rest: ~0.6 us a read). These
check that what they build is the Record the dataclass would build, field for field, so a
field added to Record later cannot be left unset there."""

from __future__ import annotations

import dataclasses

import pytest

from densekv.sessions.model import Record
from densekv.sessions.payload import CONTINUED, MARKER
from densekv.sessions.record import pack_record, unpack_record, with_rest

DIGEST = bytes(range(16))
FIELDS = {f.name for f in dataclasses.fields(Record)}


def rec(**kw: object) -> Record:
    base: dict[str, object] = {"digest": DIGEST, "identity": 42, "expires_at": 1_900_000_000,
                               "absolute_at": 1_900_000_000}
    return Record(**{**base, **kw})  # type: ignore[arg-type]


CASES = [
    ("inline", rec(payload=b"\x01abc"), b"\x01abc"),
    ("anonymous, str identity", rec(identity="ann", payload=b"\x02x"), b"\x02x"),
    ("no identity", rec(identity=None, payload=b"\x02x"), b"\x02x"),
    ("idle expiry", rec(absolute_at=1_950_000_000, payload=b"\x02x"), b"\x02x"),
    ("split", rec(outside=True, part=b"first"), CONTINUED + b"first"),
    ("out of line", rec(outside=True), MARKER),
    ("no payload", rec(), None),
]


@pytest.mark.parametrize("name,want,payload", CASES, ids=[c[0] for c in CASES])
def test_unpack_record_builds_the_dataclass_record(name: str, want: Record, payload: bytes | None) -> None:
    raw = pack_record(want, payload)
    got = unpack_record(DIGEST, raw)
    assert set(vars(got)) == FIELDS
    assert got == dataclasses.replace(want, raw=raw)
    assert type(got.raw) is bytes


def test_with_rest_is_replace() -> None:
    split = unpack_record(DIGEST, pack_record(rec(), CONTINUED + b"first"))
    got = with_rest(split, b"-rest")
    assert set(vars(got)) == FIELDS
    assert got == dataclasses.replace(split, payload=b"first-rest", ool=b"-rest")
    ool = unpack_record(DIGEST, pack_record(rec(), MARKER))
    assert with_rest(ool, b"whole") == dataclasses.replace(ool, payload=b"whole", ool=b"whole")
    assert with_rest(ool, None) is ool
