"""Key zipping without a server: lossless round trips, injectivity, the seed's collision."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from densekv.errors import AliasError
from densekv.maps.zipkeys import Aliases, base62, unbase62, unzip_key, zip_crumb, zip_key

crumb_text = st.text(alphabet=st.sampled_from(list("ab#$\\0179:uz_é")), max_size=8)
alias_tables = st.dictionaries(
    st.text(alphabet="abuser0179", min_size=1, max_size=5),
    st.text(alphabet="abuz017", min_size=1, max_size=3),
    max_size=4,
).filter(lambda t: len(set(t.values())) == len(t))


@given(st.text())
def test_any_key_round_trips_without_aliases(key: str) -> None:
    assert unzip_key(zip_key(key)) == key


@given(crumb_text, alias_tables)
def test_any_key_round_trips_with_any_valid_alias_table(key: str, table: dict[str, str]) -> None:
    aliases = Aliases(table)
    assert unzip_key(zip_key(key, aliases), aliases) == key


@given(crumb_text, crumb_text, alias_tables)
def test_distinct_keys_zip_to_distinct_text(a: str, b: str, table: dict[str, str]) -> None:
    aliases = Aliases(table)
    if a != b:
        assert zip_key(a, aliases) != zip_key(b, aliases)


@given(st.integers(0, 10**40))
def test_base62_round_trip(n: int) -> None:
    assert unbase62(base62(n)) == n


def test_leading_zeros_stay_distinct() -> None:
    assert zip_key("user:0000007") != zip_key("user:7") != zip_key("user:07")
    assert unzip_key(zip_key("user:0000007")) == "user:0000007"


@pytest.mark.parametrize(
    ("key", "zipped"),
    [("user:1234567", "u:#5BAN"), ("user:7", "u:7"), ("u:7", "\\u:7"), ("user:0001234567", "u:$Auq9yx"),
     ("post:comments", "post:comments"), ("#tag", "\\#tag"), ("", "")],
)
def test_zip_table(key: str, zipped: str) -> None:
    aliases = Aliases({"user": "u"})
    assert zip_key(key, aliases) == zipped
    assert unzip_key(zipped, aliases) == key


def test_integers_shrink_about_1_8x() -> None:
    assert len(zip_crumb("1234567890123")) == 1 + 7  # 13 digits -> marker + 7


@pytest.mark.parametrize("table", [{"a": "#x"}, {"a": "x", "b": "x"}, {"a:b": "x"}, {"": "x"}, {"a": ""}])
def test_ambiguous_alias_tables_are_refused(table: dict[str, str]) -> None:
    with pytest.raises(AliasError):
        Aliases(table)
