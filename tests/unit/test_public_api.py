"""densekv/__init__.py is the one public import path: every exported name exists; every error
the runtime raises on purpose is a DensekvError; the API reference names no private class."""

from pathlib import Path

import pytest

import densekv
import densekv.errors


def test_all_names_exist_and_are_sorted() -> None:
    for name in densekv.__all__:
        assert hasattr(densekv, name), name
    assert list(densekv.__all__) == sorted(densekv.__all__, key=str)


def test_no_private_module_leaks_into_all() -> None:
    assert not [n for n in densekv.__all__ if n.startswith("_") and n != "__version__"]


def test_the_durability_errors_are_exported() -> None:
    expected = {"NotDurable", "WriteInDoubt"}
    assert expected <= set(densekv.__all__)
    assert issubclass(densekv.WriteInDoubt, densekv.ServerUnavailable)


def test_the_bad_input_errors_are_exported() -> None:
    expected = {"InvalidArgument", "MapKeyInvalid", "MapValueInvalid", "SessionIdentityInvalid"}
    assert expected <= set(densekv.errors.__all__)
    assert "InvalidArgument" in densekv.__all__  # the base a user catches
    assert issubclass(densekv.errors.SessionIdentityInvalid, (TypeError)) and issubclass(densekv.InvalidArgument, ValueError)
    assert all(issubclass(getattr(densekv.errors, n), densekv.DensekvError) for n in expected)


# --- what a user imports (issue 33) --------------------------------------------------------


def test_all_is_what_a_user_imports_and_the_errors_a_user_catches() -> None:
    assert len(densekv.__all__) <= 40
    kinds = {"SessionStore", "AsyncSessionStore", "Session", "CompactSet", "AsyncCompactSet",
             "SetFamily", "AsyncSetFamily", "CompactMap", "AsyncCompactMap", "MapBatch",
             "AsyncMapBatch", "BloomFilter", "AsyncBloomFilter"}
    assert kinds | {"connect", "probe", "Capabilities", "embedded", "__version__"} <= set(densekv.__all__)
    errors = [n for n in densekv.__all__ if n[0].isupper() and issubclass(getattr(densekv, n), BaseException)]
    assert all(getattr(densekv, n) is getattr(densekv.errors, n) for n in errors)
    # the few a user catches: 10 until issue 34's SessionLimitReached (a login refused by
    # max_sessions_per_identity, on_limit="refuse"), which a web app catches in its view
    assert len(errors) <= 11


def test_a_star_import_gives_no_deprecated_name() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec("from densekv import *", {})  # noqa: S102


@pytest.mark.parametrize(("name", "module"), sorted(densekv._NEW_PATH.items()))
def test_a_name_that_left_all_still_resolves_and_warns(name: str, module: str) -> None:
    import importlib

    assert name not in densekv.__all__ and name not in dir(densekv)
    with pytest.warns(DeprecationWarning, match=rf"^densekv\.{name} moved to {module}\.{name}:"):
        value = getattr(densekv, name)
    assert value is getattr(importlib.import_module(module), name)


# --- one hierarchy of errors (issue 24) ----------------------------------------------------

#: Exception classes of the runtime that are not densekv errors on purpose.
NOT_DENSEKV_ERRORS = {
    # an executor's internal signal (a redis ConnectionError before the first reply, which it
    # retries); never reaches a user
    "densekv.wire.NothingRead",
}


def runtime_exceptions() -> list[type[BaseException]]:
    """Every public exception class defined in a runtime (non-tool) module of densekv."""
    import importlib

    from tests.unit.test_import_cycles import module_files
    from tests.unit.test_tools_use_public_names import is_tool

    found = []
    for name in sorted(module_files()):
        if is_tool(name) or name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        found += [obj for attr, obj in vars(module).items()
                  if issubclass(type(obj), type) and issubclass(obj, BaseException)  # type(): no lazy object wakes
                  and obj.__module__ == name and not attr.startswith("_")]
    return found


def test_every_error_of_the_runtime_is_a_densekv_error() -> None:
    errors = runtime_exceptions()
    assert densekv.InvalidArgument in errors and densekv.errors.MapKeyInvalid in errors
    strays = [f"{e.__module__}.{e.__qualname__}" for e in errors
              if not issubclass(e, densekv.DensekvError)
              and f"{e.__module__}.{e.__qualname__}" not in NOT_DENSEKV_ERRORS]
    assert not strays, f"derive these from densekv.errors.DensekvError: {strays}"


def test_bad_arguments_are_invalid_argument_and_still_value_errors() -> None:
    from densekv.errors import AliasError
    from densekv.keys import partition_bits, partition_count
    from densekv.maps.meta import check_namespace

    for call in (lambda: partition_bits(3), lambda: partition_count(-1, 128),
                 lambda: check_namespace("a b")):
        with pytest.raises(densekv.InvalidArgument):
            call()
    assert issubclass(AliasError, densekv.InvalidArgument) and issubclass(AliasError, ValueError)


# --- the API reference shows no private name ----------------------------------------------


def test_the_reference_folds_private_bases_into_the_public_class() -> None:
    """docs/api/griffe_public_bases.py (loaded by mkdocs.yml): SessionStore inherits its
    options from the private `_Options`; the reference shows them as SessionStore's own and
    no private base (tests/unit/test_docs_site.py builds the whole site)."""
    griffe = pytest.importorskip("griffe")
    root = Path(__file__).resolve().parents[2]
    extensions = griffe.load_extensions(f"{root}/docs/api/griffe_public_bases.py:PublicBases")
    package = griffe.load("densekv", search_paths=[str(root)], extensions=extensions,
                          resolve_aliases=False)
    store = package["sessions.store.SessionStore"]
    assert not [b for b in store.bases if str(b).rsplit(".", 1)[-1].startswith("_")]
    assert {"ttl", "idle_ttl", "max_data_bytes", "namespace", "now", "due_for_touch"} <= set(store.members)
    assert "DensekvError" in [str(b).rsplit(".", 1)[-1] for b in package["errors.InvalidArgument"].bases]
