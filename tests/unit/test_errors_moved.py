"""One error hierarchy (issue 33): every public error is defined in densekv.errors, and the
old import paths of the errors that moved there keep working for one minor release, with a
DeprecationWarning that names the new path. The table below is the list of moves that
CHANGELOG.md gives users."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import densekv
import densekv.errors
from densekv.errors import DensekvError
from tests.unit.test_import_cycles import module_files

#: old module -> the errors it defined or exported before they moved to densekv.errors
MOVED: dict[str, tuple[str, ...]] = {
    "densekv.analyze.errors": ("AnalyzeError",),
    "densekv.analyze.scan": ("ServerUnavailableError",),
    "densekv.bulk": ("BulkLoadError",),
    "densekv.codec": ("CodecError", "CodecUnavailable"),
    "densekv.lab.cli": ("LabInterrupted",),
    "densekv.lab.experiments.base": ("NotReplayable",),
    "densekv.lab.target": ("LabError", "LabRefused"),
    "densekv.maps": ("FieldTtlUnavailable", "MapConfigError", "MapKeyInvalid", "MapValueInvalid",
                     "TransactionError", "ValueTooLarge"),
    "densekv.maps.buckets": ("KeyTooLong",),
    "densekv.maps.compact": ("FieldTtlUnavailable", "MapConfigError", "MapKeyInvalid", "MapValueInvalid",
                             "NotAnInteger", "TransactionError", "ValueTooLarge"),
    "densekv.maps.errors": ("FieldTtlUnavailable", "MapConfigError", "MapKeyInvalid", "MapValueInvalid",
                            "NotAnInteger", "TransactionError", "ValueTooLarge"),
    "densekv.maps.zipkeys": ("AliasError",),
    "densekv.measure": ("MeterError",),
    "densekv.planner": ("PlannerError",),
    "densekv.planner.errors": ("PlannerError",),
    "densekv.sessions": ("LayoutUnavailable", "SessionDataInvalid", "SessionDataTooLarge", "SessionExists",
                         "SessionIdentityInvalid"),
    "densekv.sessions.core": ("LayoutUnavailable",),
    "densekv.sessions.meta": ("LayoutUnavailable",),
    "densekv.sessions.model": ("SessionDataInvalid", "SessionDataTooLarge", "SessionExists",
                               "SessionIdentityInvalid"),
    "densekv.sessions.payload": ("SessionDataInvalid", "SessionDataTooLarge"),
    "densekv.sessions.store": ("LayoutUnavailable",),
    "densekv.sets": ("BadItem", "SetMismatch"),
    "densekv.sets.bloom": ("BadBloomItem", "BloomFull", "BloomMismatch", "BloomModuleMissing",
                           "BloomNotFound", "BloomParameterError"),
    "densekv.sets.bloom_errors": ("BadBloomItem", "BloomFull", "BloomMismatch", "BloomModuleMissing",
                                  "BloomNotFound", "BloomParameterError"),
    "densekv.sets.compact": ("SetMismatch",),
    "densekv.sets.items": ("BadItem",),
}

OLD_PATHS = [(module, name) for module, names in MOVED.items() for name in names]


@pytest.mark.parametrize(("module", "name"), OLD_PATHS, ids=[f"{m}.{n}" for m, n in OLD_PATHS])
def test_an_old_path_still_gives_the_error_and_warns(module: str, name: str) -> None:
    old = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"^{module}\.{name} moved to densekv\.errors\.{name}:"):
        error = getattr(old, name)
    assert error is getattr(densekv.errors, name)
    assert name not in getattr(old, "__all__", ())  # a star import gives no deprecated name


def test_from_an_old_module_import_warns_at_the_importing_line() -> None:
    with pytest.warns(DeprecationWarning, match="densekv.errors.ValueTooLarge") as caught:
        from densekv.maps import ValueTooLarge
    assert ValueTooLarge is densekv.errors.ValueTooLarge
    assert caught[0].filename == __file__  # stacklevel: the user's line, not densekv's


def test_other_names_of_an_old_module_are_still_attribute_errors() -> None:
    import densekv.maps
    import densekv.sessions.payload

    with pytest.raises(AttributeError, match="no_such_name"):
        densekv.maps.no_such_name  # noqa: B018
    assert not hasattr(densekv.sessions.payload, "DensekvErrors")


def test_the_table_is_every_module_that_keeps_an_old_path() -> None:
    """A module with a `_MOVED` tuple (its `__getattr__` warns for those names) is in MOVED
    with the same names, and the other way round."""
    found = {}
    for name, path in sorted(module_files().items()):
        if "_MOVED = (" in path.read_text():
            found[name] = tuple(sorted(importlib.import_module(name)._MOVED))
    assert found == {m: tuple(sorted(n)) for m, n in MOVED.items()}


def test_every_public_error_of_the_package_is_densekv_errors_own() -> None:
    """Any public DensekvError subclass in any module's namespace (runtime and tools) is
    the class densekv.errors defines: one definition, importable from there."""
    strays = []
    for name in sorted(module_files()):
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():  # vars(): the deprecated names do not wake
            if (issubclass(type(obj), type) and issubclass(obj, DensekvError)  # type(): no lazy object wakes
                    and not attr.startswith("_") and getattr(densekv.errors, attr, None) is not obj):
                strays.append(f"{name}.{attr} ({obj.__module__}.{obj.__qualname__})")
    assert not strays, f"define these in densekv/errors.py: {strays}"


def test_every_error_is_exported_and_says_when_it_is_raised() -> None:
    errors = [obj for obj in vars(densekv.errors).values()
              if isinstance(obj, type) and issubclass(obj, DensekvError)]
    assert len(errors) >= 45
    assert {e.__name__ for e in errors} <= set(densekv.errors.__all__)
    undocumented = [e.__name__ for e in errors if not (e.__dict__.get("__doc__") or "").strip()]
    assert not undocumented
    assert all(e.__module__ == "densekv.errors" for e in errors)


def test_the_changelog_lists_every_move() -> None:
    """CHANGELOG.md's table: a row `| old module | names | new module |` per move (the
    table of moved modules has two columns: tests/unit/test_layers.py reads it)."""
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text().splitlines()
            if line.startswith("| `densekv")]
    listed = {(old.strip("`"), name.strip().strip("`"), new.strip("`"))
              for old, names, new in (r for r in rows if len(r) == 3) for name in names.split(",")}
    moves = {(module, name, "densekv.errors") for module, name in OLD_PATHS}
    moves |= {("densekv", name, module) for name, module in densekv._NEW_PATH.items()}
    assert moves <= listed, sorted(moves - listed)
