"""The payloads a plan prices (densekv/tools/planner/payloads.py): --payload's incompressible
bytes, --sample files, the store's framing (plain, then with a dictionary trained on the
first AUTO_TRAIN payloads) and the mix of both in a calibration sample. No server."""

from __future__ import annotations

import json
import random
from pathlib import Path

import msgpack
import pytest

from densekv.capabilities import Capabilities
from densekv.codec import ZstdDictionary
from densekv.dictionaries import train_dictionary
from densekv.errors import PlannerError
from densekv.sessions.payload import PayloadCodec, pack_data, train_payloads
from densekv.tools.lab.session_profiles import session, write_sample
from densekv.tools.planner.core import check_input
from densekv.tools.planner.kinds import SessionsPlanner, Workload
from densekv.tools.planner.payloads import (
    AUTO_TRAIN,
    DICT,
    RAW,
    Incompressible,
    era_of,
    random_data,
    raw_count,
    read_sample,
    sampled,
    store_era,
)


@pytest.mark.parametrize("size", [1, 4, 5, 6, 31, 32, 33, 36, 100, 166, 255, 260, 261, 262, 300, 1000, 65_535])
def test_incompressible_data_packs_to_the_asked_size(size: int) -> None:
    data = random_data(size, random.Random(size))
    assert data is not None
    packed = len(msgpack.packb(data, use_bin_type=True))
    assert packed == size or (size < 5 and packed == 1)


def test_incompressible_payloads_frame_plain_even_with_a_dictionary() -> None:
    """Random bytes: no codec shrinks them, so N bytes of data frame to 1 + N, with the
    store's dictionary (trained on such payloads) or without: the price --payload says."""
    inc = Incompressible(166, seed=7)
    packed = [pack_data(inc.session(RAW, k)[1] or {}) for k in range(200)]
    codec = PayloadCodec()
    codec.use(ZstdDictionary.of(train_dictionary(packed, size=4096)))
    for k in range(100):
        data = inc.session(DICT, k)[1]
        assert data is not None and len(codec.encode(data)[1]) == 167
        assert len(inc.framed(DICT, k)[1] or b"") == 167
    assert inc.session(RAW, 3) != inc.session(DICT, 3)  # a fresh draw a session
    assert "incompressible" in inc.describe(20_000) and "--sample" in inc.describe(20_000)
    assert Incompressible(0, seed=7).framed(RAW, 0)[1] is None


@pytest.mark.parametrize(("n", "items"), [(10, 10), (1000, 1000), (20_000, 20_000), (3000, 20_000),
                                          (1000, 1_000_000), (120_000, 10_000_000)])
def test_a_sample_holds_the_loads_mix_of_plain_and_dictionary_sessions(n: int, items: int) -> None:
    eras = [era_of(j, n, items) for j in range(n)]
    raw = [k for e, k in eras if e == RAW]
    framed = [k for e, k in eras if e == DICT]
    assert raw == list(range(len(raw))) and framed == list(range(len(framed)))  # each era counts from 0
    assert abs(len(raw) - n * raw_count(items) / items) <= 1
    if n == items:  # the load itself: the same sessions as a store writes
        assert len(raw) == raw_count(items)
        assert sorted(eras) == sorted(store_era(i, items) for i in range(items))
    half = [e for e, _ in eras[: n // 2]]  # the half-fill reading holds the same share (the fit's two readings)
    assert abs(half.count(RAW) - len(raw) / 2) <= 1


def test_the_dictionary_prices_sessions_it_was_not_trained_on(tmp_path: Path) -> None:
    path = tmp_path / "p1.jsonl"
    write_sample("P1", path, 600)
    s = read_sample(path)
    assert s.count == 600 and len(s.train) == 300 and len(s.priced) == 300 and s.held_out
    assert s.session(RAW, 0) == session("P1", 0) and s.session(RAW, 300) == session("P1", 0)  # cycled
    assert s.session(DICT, 0) == session("P1", 300)
    assert s.dictionary_trained
    packed = [pack_data(d or {}) for _, d in (s.session(RAW, k) for k in range(AUTO_TRAIN))]
    codec = PayloadCodec()
    codec.use(ZstdDictionary.of(train_payloads(packed)))  # what the store trains, as it trains it
    assert [len(codec.encode(d or {})[1]) for _, d in s.priced[:50]] == [len(s.framed(DICT, k)[1] or b"") for k in range(50)]
    info = s.to_dict(20_000)
    assert info["dictionary"] and info["framed_mean"] < 0.5 * info["packed_mean"]  # a Django login: 135 -> ~50
    assert info["plain_framed_mean"] == pytest.approx(info["packed_mean"] + 1, abs=2)
    assert "trained on 300 of them, priced on the other 300" in s.describe(20_000)
    assert "all 1,000 go plain" in s.describe(1000)


def test_a_sample_of_few_sessions_is_priced_on_all_of_them() -> None:
    s = sampled([{"csrf_token": "ab" * 20}] * 10)
    assert not s.held_out and len(s.priced) == len(s.train) == 10
    assert "too few to hold any out" in s.describe(20_000)


def test_sample_lines_data_dicts_and_identities(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [{"identity": None, "data": {"a": 1}}, {"identity": "alice", "data": {"b": 2}},
             {"cart": [1, 2]}, {"data": {"c": 3}}, {"data": 5, "x": 1}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    s = read_sample(path)
    got = s.train if not s.held_out else s.train + s.priced
    assert got[0] == (None, {"a": 1}) and got[1] == ("alice", {"b": 2})
    assert got[2][1] == {"cart": [1, 2]} and isinstance(got[2][0], int) and got[2][0] >= 1 << 24  # drawn
    assert got[3][1] == {"c": 3} and isinstance(got[3][0], int)
    assert got[4][1] == {"data": 5, "x": 1}  # not the wrapper form: a data dict


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json}\n", "line 1: not JSON"),
        ('{"a": 1}\n[1, 2]\n', "line 2: a session is a JSON object"),
        ('{"a": NaN}\n', "line 1: session data"),
        ('{"identity": true, "data": {}}\n', "line 1: identity"),
        ('{"identity": -1, "data": {}}\n', "line 1: an int identity"),
        ("\n\n", "holds no sessions"),
        (b"\xff\xfe{}".decode("latin-1"), "not UTF-8"),
    ],
)
def test_a_bad_sample_is_one_line_naming_where(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(PlannerError, match=words) as caught:
        read_sample(path)
    assert "\n" not in str(caught.value)


def test_a_missing_sample_is_a_planner_error(tmp_path: Path) -> None:
    with pytest.raises(PlannerError, match="cannot read the sample"):
        read_sample(tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    ("kind", "payload", "words"),
    [("set", 0, "--kind sessions"), ("map", 0, "--kind sessions"), ("sessions", 100, "not both")],
)
def test_sample_input_checks(tmp_path: Path, kind: str, payload: int, words: str) -> None:
    path = tmp_path / "s.jsonl"
    write_sample("P0", path, 20)
    with pytest.raises(PlannerError, match=words):
        check_input(kind, 1000, payload, False, str(path))


def _caps(value: int = 64) -> Capabilities:
    return Capabilities("valkey", "9.1.2", "libc", 128, value, 128, 64, 128, 64, 512, "none", None, (),
                        False, 0, "noeviction", False)


def test_candidates_place_records_as_the_store_frames_them(tmp_path: Path) -> None:
    """The defect of issue 32: 166 bytes of compressible data were priced plain (a 176-byte
    record, out of line) while the store wrote them with its dictionary. Now --payload is
    incompressible (and says so), and a sample's records are sized with the dictionary."""
    planner = SessionsPlanner()
    plain = planner.candidates(Workload("sessions", 20_000, 166), _caps())
    dense = [c for c in plain if c.layout == "dense"]
    assert [c.options for c in dense] == [{}, {"hash-max-listpack-value": "176"}]
    assert "176-byte session record" in dense[0].note and "out of line" in dense[0].note
    path = tmp_path / "p1.jsonl"
    write_sample("P1", path, 600)
    wl = check_input("sessions", 20_000, 0, False, str(path))
    recs = planner.records(wl)
    assert max(r for r, _ in recs) < 80  # framed with the dictionary: ~50 B + the 9-byte record
    p1 = [c for c in planner.candidates(wl, _caps()) if c.layout == "dense"]
    assert p1[0].shape["sample"] == wl.sessions.fingerprint  # type: ignore[union-attr]
    assert [c.layout for c in planner.candidates(wl, _caps(256))].count("dense") == 1  # all inline: no raise offered
    mixed = next(c for c in planner.candidates(wl, _caps(51)) if c.layout == "dense").note  # records of 50-52 B
    assert "% inline" in mixed and "% split" in mixed
    assert planner.payloads(wl)["source"] == "sample"  # type: ignore[index]
