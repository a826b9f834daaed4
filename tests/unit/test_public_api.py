"""densekv/__init__.py is the one public import path: every exported name exists."""

import densekv


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
    assert expected <= set(densekv.__all__)
    assert issubclass(densekv.SessionIdentityInvalid, (TypeError)) and issubclass(densekv.InvalidArgument, ValueError)
    assert all(issubclass(getattr(densekv, n), densekv.DensekvError) for n in expected)
