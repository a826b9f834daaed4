"""A griffe extension for the API reference (mkdocs.yml loads it into mkdocstrings): a public
class that inherits from a private helper (SessionStore from `_Options`, CompactSet from
`_SetShell`, ...) is shown with the public members it gets from that helper as its own, and
with the helper's public bases in its place, so no private name appears in the reference.
The opening helpers every kind shares (HELPERS: `open()`, docs/api/densekv.md, "When densekv
talks to the server") are public names, but their members are shown the same way, as the
kind's own.

Only the rendered documentation changes; the code is read, never imported or altered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import griffe


def _path(base: Any) -> str:
    return str(base if isinstance(base, str) else base.canonical_path)


#: public helper classes whose public members a kind shows as its own
HELPERS = frozenset({"densekv.twins.OpensOnce", "densekv.twins.AsyncOpensOnce",
                     "densekv.sets.compact.OpenedOnFirstUse"})


def _private(base: Any) -> bool:
    return _path(base).rsplit(".", 1)[-1].startswith("_")


def _public_bases(cls: griffe.Class, seen: frozenset[str] = frozenset()) -> list[Any]:
    """cls's bases with each private one replaced by its own public bases (recursively)."""
    out: list[Any] = []
    for base in cls.bases:
        if not _private(base):
            out.append(base)
            continue
        path = _path(base)
        if path in seen:
            continue
        try:
            resolved = cls.modules_collection.get_member(path)
            resolved = resolved.final_target if resolved.is_alias else resolved
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue  # not loaded: nothing public to show in its place
        if resolved.is_class:  # typing.Generic of a private helper says nothing to a user
            out.extend(b for b in _public_bases(resolved, seen | {path})
                       if b not in out and _path(b) != "typing.Generic")
    return out


def _classes(obj: griffe.Object) -> Iterator[griffe.Class]:
    for member in list(obj.members.values()):
        if member.is_alias:
            continue
        if isinstance(member, griffe.Class):
            yield member
        if member.is_module or member.is_class:
            yield from _classes(member)  # type: ignore[arg-type]


class PublicBases(griffe.Extension):
    """Fold private base classes into the public classes that inherit from them."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for cls in _classes(pkg):
            if not any(_private(b) or _path(b).split("[")[0] in HELPERS for b in cls.bases):
                continue
            for name, inherited in cls.inherited_members.items():
                target = inherited.final_target
                owner = target.parent
                helper = owner is not None and (owner.name.startswith("_") or owner.path in HELPERS)
                if (name.startswith("_") and name != "__init__") or not helper:
                    continue  # private, or inherited from a public class (shown as such)
                cls.set_member(name, griffe.Alias(name, target, parent=cls))
            cls.bases = _public_bases(cls)
