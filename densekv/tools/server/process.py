"""One server process on loopback: start it, wait until it answers, stop it, leave nothing.

Used by the embedded server, the cluster fixture, the test matrix and the lab. A process
started here dies with its parent (PR_SET_PDEATHSIG on Linux) unless it was started
detached for `densekv server start`, and its temporary directory goes with it, so a
crashed test or command leaks neither a process nor a directory.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

import redis

from densekv.errors import InvalidArgument, PortInUse, ServerStartFailed
from densekv.tools.server.binaries import ServerBinary

_LIVE: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


def free_port() -> int:
    """A loopback port that was free a moment ago (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ServerProcess:
    """A running server. `options` are extra `--name value` settings."""

    def __init__(
        self,
        binary: ServerBinary,
        *,
        port: int | None = None,
        options: Mapping[str, str] | None = None,
        aof: bool = False,
        detached: bool = False,
        workdir: Path | None = None,
    ) -> None:
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535):
            raise InvalidArgument(f"port {port!r} is not a TCP port: give 1-65535 (or none for a free one)")
        self.binary = binary
        self.requested_port = port
        self.port = port or 0
        self.options = dict(options or {})
        self.aof = aof
        self.detached = detached
        self._own_dir = workdir is None
        self.dir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="densekv-"))
        self.proc: subprocess.Popen[bytes] | None = None

    # -- lifecycle -------------------------------------------------------------
    @property
    def password(self) -> str | None:
        """The requirepass this process was started with (its clients and URL carry it)."""
        return self.options.get("requirepass") or None

    @property
    def url(self) -> str:
        if self.password:
            return f"redis://:{quote(self.password, safe='')}@127.0.0.1:{self.port}/0"
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.dir / "server.log"

    def argv(self) -> list[str]:
        args = [
            str(self.binary.path),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--protected-mode", "no",
            "--daemonize", "no",
            "--dir", str(self.dir),
            "--logfile", str(self.log_path),
            "--save", "",
            "--appendonly", "yes" if self.aof else "no",
        ]
        if self.aof:
            args += ["--appendfsync", "always"]
        for name, value in self.options.items():
            args += [f"--{name}", str(value)]
        return args

    def start(self, timeout: float = 15.0) -> ServerProcess:
        attempts = 1 if self.requested_port else 3
        for attempt in range(attempts):
            if not self.requested_port:
                self.port = free_port()
            elif port_in_use(self.port):
                self._cleanup_dir()
                raise PortInUse(
                    f"port {self.port} is in use: pick another port or stop what holds it"
                )
            try:
                self._spawn_and_wait(timeout)
                _LIVE.add(self)
                return self
            except PortInUse:
                if attempt + 1 == attempts:
                    self._cleanup_dir()
                    raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _spawn_and_wait(self, timeout: float) -> None:
        self.log_path.unlink(missing_ok=True)
        try:
            with open(self.dir / "stderr.log", "wb") as stderr:
                self.proc = subprocess.Popen(
                    self.argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    cwd=self.dir,
                    start_new_session=self.detached,
                    preexec_fn=None if self.detached else _die_with_parent,  # noqa: PLW1509  # one prctl call, no locks
                )
        except OSError as exc:
            raise ServerStartFailed(
                f"cannot run {self.binary.path}: {exc.strerror}; run scripts/get-servers"
            ) from exc
        deadline = time.monotonic() + timeout
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, password=self.password)
        try:
            while True:
                code = self.proc.poll()
                if code is not None:
                    self._raise_exit(code)
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                except redis.ResponseError as exc:  # LOADING (AOF replay) answers an error
                    if "LOADING" not in str(exc):
                        raise
                if time.monotonic() > deadline:
                    raise ServerStartFailed(
                        f"{self.binary.name} on port {self.port} did not answer within "
                        f"{timeout:.0f}s; log: {self.log_tail()}"
                    )
                time.sleep(0.02)
        finally:
            client.close()

    def _raise_exit(self, code: int) -> None:
        try:
            err = (self.dir / "stderr.log").read_text(errors="replace")
        except OSError:
            err = ""
        text = (err + " " + self.log_tail()).strip()
        self.proc = None
        if "Address already in use" in text:
            raise PortInUse(f"port {self.port} is in use: pick another port")
        raise ServerStartFailed(
            f"{self.binary.name} exited at once (code {code}): {text[-300:] or 'no output'}"
        )

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Kill the process (for fault tests); the directory stays, see restart()."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.proc = None

    def restart(self, timeout: float = 30.0) -> None:
        """Start again on the same port and directory (AOF is replayed if on)."""
        if self.proc is not None:
            self.kill(signal.SIGTERM)
        self._spawn_and_wait(timeout)

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and remove its directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        self._cleanup_dir()
        _LIVE.discard(self)

    def _cleanup_dir(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, **kwargs: object) -> redis.Redis:
        kwargs.setdefault("password", self.password)
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)  # type: ignore[arg-type]

    def __enter__(self) -> ServerProcess:  # noqa: PYI034  # typing.Self needs 3.11
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        if not server.detached:
            with contextlib.suppress(Exception):
                server.stop()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
