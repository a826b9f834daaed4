"""The identity a web session's data names, one rule for every shell that reads one
(densekv/integrations/identity_flows.identity_named): Flask's and Quart's login() and
Flask-Login's `_user_id`, Django's `_auth_user_id`. A table, no server: the canonical decimal
text of an int identity is that int (so login(42) and Flask-Login's "42" are one user), any
other text stays itself (so the CharField primary keys "042" and "42" stay two users: Django's
reader took "042" as 42 before, and a log out everywhere of one ended the other's sessions)."""

from __future__ import annotations

from typing import Any

import pytest

from densekv.errors import SessionIdentityInvalid
from densekv.integrations.identity_flows import identity_forms, identity_named

ROWS = [
    (42, 42), ("42", 42), ("0", 0), (0, 0), (str(2**64 - 1), 2**64 - 1), (str(2**64), str(2**64)),
    ("042", "042"), ("00", "00"), ("+4", "+4"), ("-4", "-4"), (" 4", " 4"), ("4 ", "4 "),
    ("4.0", "4.0"), ("٤", "٤"), ("²", "²"), ("alice", "alice"),
]


@pytest.mark.parametrize("given,indexed", ROWS)
def test_identity_named(given: Any, indexed: Any) -> None:
    got = identity_named(given)
    assert got == indexed and type(got) is type(indexed)


@pytest.mark.parametrize("given,indexed", ROWS)
def test_flask_shell_reads_the_same_rule(given: Any, indexed: Any) -> None:
    pytest.importorskip("flask")
    from densekv.integrations.flask_session import identity_of

    got = identity_of(given)
    assert got == indexed and type(got) is type(indexed)


@pytest.mark.parametrize("given,indexed", [
    *ROWS, (None, None), ("", None), (True, None), (-4, "-4"), (2**64, str(2**64)),
    (4.0, "4.0"),
])
def test_django_shell_reads_the_same_rule(given: Any, indexed: Any) -> None:
    pytest.importorskip("django")
    from densekv.integrations.django.values import identity_of

    got = identity_of({"_auth_user_id": given})
    assert got == indexed and type(got) is type(indexed)


@pytest.mark.parametrize("bad", [True, 1.5, b"42", -1, 2**64, "", "x" * 255])
def test_what_no_store_indexes_is_refused(bad: Any) -> None:
    with pytest.raises(SessionIdentityInvalid):
        identity_named(bad)


def test_an_int_identity_is_also_looked_up_as_its_text() -> None:
    assert identity_forms(42) == (42, "42")
    assert identity_forms("alice") == ("alice",)
