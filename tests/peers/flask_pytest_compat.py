"""Loaded (`-p flask_pytest_compat`) into BOTH runs of Flask's own tests, the control and
densekv's: Flask 3.1.3's tests/conftest.py uses `_pytest.monkeypatch.notset`, which pytest 9
renamed NOTSET (same meaning: "no value, delete on undo"). The old name is put back so the
unchanged conftest imports; nothing else is touched.
"""

from __future__ import annotations

import _pytest.monkeypatch

if not hasattr(_pytest.monkeypatch, "notset"):
    _pytest.monkeypatch.notset = _pytest.monkeypatch.NOTSET  # type: ignore[attr-defined]
