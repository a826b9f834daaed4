"""The documentation site builds with `mkdocs build --strict` (a broken link, anchor or
docstring reference fails it), and its API reference documents what users look for: the
session store's methods and every public name of each framework backend. The names are read
from the modules' `__all__` in the source, so a new public name without a rendered entry
fails here."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("mkdocs", reason="the docs tools are not installed (pip install '.[docs]')")
pytest.importorskip("mkdocstrings_handlers.python",
                    reason="mkdocstrings[python] is not installed (pip install '.[docs]')")
pytest.importorskip("material", reason="mkdocs-material is not installed (pip install '.[docs]')")

SESSION_METHODS = ("create", "get", "get_many", "apply", "touch", "set_ttl", "login", "regenerate",
                   "destroy", "destroy_all", "sessions_of", "sweep", "stats", "explain")
FRAMEWORKS = {"flask": "densekv/integrations/flask.py",
              "django": "densekv/integrations/django/__init__.py",
              "starlette": "densekv/integrations/starlette.py",
              "aiohttp": "densekv/integrations/aiohttp.py",
              "quart": "densekv/integrations/quart.py",
              "litestar": "densekv/integrations/litestar.py"}
# the methods a user calls on each framework's session object
FRAMEWORK_METHODS = {
    "flask": ("DensekvSession.login", "DensekvSession.regenerate", "DensekvSession.destroy",
              "DensekvSession.logout_everywhere", "SessionInterface.from_url"),
    "django": ("SessionStore.logout_everywhere", "SessionStore.alogout_everywhere",
               "SessionStore.cycle_key"),
    "starlette": ("SessionMiddleware",),
    "aiohttp": ("Storage.load_session", "Storage.save_session"),
    "quart": ("DensekvSession.login", "DensekvSession.regenerate", "DensekvSession.destroy",
              "DensekvSession.logout_everywhere", "SessionInterface.from_url",
              "SessionInterface.store"),
    "litestar": ("SessionConfig.middleware", "SessionConfig.current_store"),
}


def exported(source: str) -> list[str]:
    """The `__all__` of a module, read from its source without importing it."""
    for node in ast.parse((ROOT / source).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__"
                                                for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{source} has no __all__")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module (about 5 s)."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def anchors(site: Path, page: str) -> str:
    return (site / "api" / page / "index.html").read_text()


def test_every_page_of_the_docs_is_built(site: Path) -> None:
    pages = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
    assert "index" in pages and "sessions" in pages and "flask" in pages
    for page in pages:
        built = site / "index.html" if page == "index" else site / page / "index.html"
        assert built.is_file(), f"docs/{page}.md was not built (missing from the nav?)"


@pytest.mark.parametrize("store", ["SessionStore", "AsyncSessionStore"])
def test_the_api_reference_has_the_session_stores_methods(site: Path, store: str) -> None:
    html = anchors(site, "sessions")
    missing = [m for m in SESSION_METHODS if f'id="densekv.sessions.{store}.{m}"' not in html]
    assert not missing, f"{store} methods missing from docs/api/sessions.md: {missing}"


def test_the_api_reference_has_every_name_of_densekv(site: Path) -> None:
    html = anchors(site, "densekv")
    # densekv.connect the function is shadowed by its module there; it has its own page
    missing = [n for n in exported("densekv/__init__.py")
               if n != "connect" and f'id="densekv.{n}"' not in html]
    assert not missing, f"densekv.__all__ names missing from the API reference: {missing}"
    assert 'id="densekv.connect.connect"' in anchors(site, "connect")
    assert 'id="densekv.connect.from_url"' in anchors(site, "connect")


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_api_reference_has_each_backends_public_names(site: Path, framework: str) -> None:
    html = anchors(site, framework)
    names = exported(FRAMEWORKS[framework]) + list(FRAMEWORK_METHODS[framework])
    missing = [n for n in names if f'id="densekv.integrations.{framework}.{n}"' not in html]
    assert not missing, f"densekv.integrations.{framework} names missing: {missing}"


@pytest.mark.parametrize(("page", "module"), [("sessions", "densekv/sessions/__init__.py"),
                                              ("sets", "densekv/sets/__init__.py"),
                                              ("maps", "densekv/maps/__init__.py")])
def test_the_api_reference_has_each_kinds_public_names(site: Path, page: str, module: str) -> None:
    html = anchors(site, page)
    missing = [n for n in exported(module) if f'id="densekv.{page}.{n}"' not in html]
    assert not missing, f"densekv.{page} names missing: {missing}"


def test_the_api_reference_has_every_error(site: Path) -> None:
    tree = ast.parse((ROOT / "densekv/errors.py").read_text())
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    html = anchors(site, "errors")
    assert "DensekvError" in classes
    missing = [c for c in classes if f'id="densekv.errors.{c}"' not in html]
    assert not missing, f"densekv.errors classes missing: {missing}"


# what each framework's session object keeps for its shell (per-request state, the shell's
# hooks): never on an API page, which shows what an app calls
INTERNALS = {
    "flask": ("DensekvSession.loader", "DensekvSession.login_as", "DensekvSession.end_all",
              "DensekvSession.stored", "DensekvSession.restart", "DensekvSession.loaded",
              "DensekvSession.read", "SessionInterface.open_session", "SessionInterface.save_session"),
    "aiohttp": ("DenseSession.tracked", "DenseSession.moved", "DenseSession.write",
                "DenseSession.lifetime"),
    "starlette": ("SessionMiddleware.load", "SessionMiddleware.save", "SessionMiddleware.stores",
                  "DenseSession.state"),
    "django": (),
    "quart": ("DensekvSession.loader", "DensekvSession.login_as", "DensekvSession.end_all",
              "DensekvSession.stored", "DensekvSession.restart", "DensekvSession.loaded",
              "DensekvSession.read", "SessionInterface.open_session", "SessionInterface.save_session",
              "SessionInterface.stores"),
    "litestar": ("SessionConfig.rules", "SessionConfig.stores", "SessionConfig.cookie",
                 "SessionBackend.load_from_connection", "SessionBackend.store_in_message",
                 "DenseSession.state"),
}


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_api_reference_shows_no_internals(site: Path, framework: str) -> None:
    html = anchors(site, framework)
    shown = [n for n in INTERNALS[framework] if f'id="densekv.integrations.{framework}.{n}"' in html]
    assert not shown, f"internals on docs/api/{framework}.md: {shown}"
    page = html.split("<article", 1)[1].split("</article>", 1)[0]
    # private helpers, and a source file named where a description belongs
    for private in ("_Tracked", "TrackedDict", "_PerLoop", ".py"):
        assert private not in page, f"{private!r} on docs/api/{framework}.md"
