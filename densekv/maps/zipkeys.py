"""Key zipping: shorter key text, losslessly, with the alias table kept in the server.

A key is split into crumbs at ':' and each crumb is written in the shortest of these forms
(grammar of one zipped crumb, checked in this order when reading):

  alias        the crumb's alias from the table (user -> u)
  '#' base62   a canonical decimal integer (no leading zero), when that is shorter
  '$' base62   a digit string with leading zeros: base62 of int("1" + digits), so
               "007" and "7" stay distinct (the seed's gem made them collide)
  '\\' text    a literal crumb that would otherwise read as one of the forms above
  text         any other crumb, as it is

So zip_key is injective and unzip_key(zip_key(k)) == k for every string k: the property
tests in tests/unit/test_map_zipkeys.py check it. The alias table is fixed when a map is
created (it is stored in the server beside the map, maps/compact.py), because an alias
added later could equal a literal crumb already stored.
"""

from __future__ import annotations

from collections.abc import Mapping

from densekv.errors import AliasError as _AliasError
from densekv.errors import DensekvError
from densekv.errors import moved as _moved

ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_INDEX = {ch: i for i, ch in enumerate(ALPHABET)}
MARKERS = ("#", "$", "\\")
MAX_DIGITS = 36  # longer digit runs stay literal (base62 of a 1e36 number is 21 chars)


def base62(n: int) -> str:
    """n >= 0 in base 62 (ALPHABET: digits, then upper case, then lower case)."""
    if n < 0:
        raise ValueError("base62 encodes non-negative integers")
    out = []
    while True:
        n, r = divmod(n, 62)
        out.append(ALPHABET[r])
        if not n:
            return "".join(reversed(out))


def unbase62(text: str) -> int:
    """The inverse of base62."""
    if not text:
        raise ValueError("empty base62 number")
    n = 0
    for ch in text:
        n = n * 62 + _INDEX[ch]
    return n


class Aliases:
    """crumb -> alias, validated so that every zipped key reads back one way."""

    def __init__(self, table: Mapping[str, str] | None = None) -> None:
        self.forward: dict[str, str] = dict(table or {})
        self.reverse: dict[str, str] = {}
        for crumb, alias in self.forward.items():
            if not isinstance(crumb, str) or not isinstance(alias, str) or not crumb or not alias:
                raise _AliasError("aliases map non-empty crumbs to non-empty strings")
            if ":" in crumb or ":" in alias:
                raise _AliasError(f"crumbs and aliases contain no ':' ({crumb!r} -> {alias!r})")
            if alias.startswith(MARKERS):
                raise _AliasError(f"alias {alias!r} starts with a character zipped keys reserve (# $ \\)")
            if alias in self.reverse:
                raise _AliasError(f"alias {alias!r} is given to two crumbs")
            self.reverse[alias] = crumb

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Aliases) and self.forward == other.forward

    def __repr__(self) -> str:
        return f"Aliases({self.forward!r})"


NO_ALIASES = Aliases()


def zip_crumb(crumb: str, aliases: Aliases = NO_ALIASES) -> str:
    alias = aliases.forward.get(crumb)
    if alias is not None:
        return alias
    best = crumb
    if crumb.isdigit() and crumb.isascii() and len(crumb) <= MAX_DIGITS:
        if crumb == "0" or crumb[0] != "0":
            candidate = "#" + base62(int(crumb))
        else:
            candidate = "$" + base62(int("1" + crumb))
        if len(candidate) < len(crumb):
            best = candidate
    if best is crumb and (crumb.startswith(MARKERS) or crumb in aliases.reverse):
        return "\\" + crumb
    return best


def unzip_crumb(zipped: str, aliases: Aliases = NO_ALIASES) -> str:
    crumb = aliases.reverse.get(zipped)
    if crumb is not None:
        return crumb
    if zipped.startswith("#"):
        return str(unbase62(zipped[1:]))
    if zipped.startswith("$"):
        return str(unbase62(zipped[1:]))[1:]
    if zipped.startswith("\\"):
        return zipped[1:]
    return zipped


def zip_key(key: str, aliases: Aliases = NO_ALIASES) -> str:
    """A key with each ':'-separated crumb zipped (zip_crumb): the short form buckets store."""
    return ":".join(zip_crumb(c, aliases) for c in key.split(":"))


def unzip_key(zipped: str, aliases: Aliases = NO_ALIASES) -> str:
    """The inverse of zip_key."""
    return ":".join(unzip_crumb(c, aliases) for c in zipped.split(":"))


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["ALPHABET", "MARKERS", "MAX_DIGITS", "NO_ALIASES", "Aliases", "base62",
           "unbase62", "unzip_crumb", "unzip_key", "zip_crumb", "zip_key"]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("AliasError",)


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
