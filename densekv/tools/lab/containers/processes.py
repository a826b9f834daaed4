"""The processes a container run starts: the app (gunicorn), memcached and PostgreSQL.

Rules, the same as densekv/tools/server/process.py's for Redis:
  * loopback only (127.0.0.1, a port the kernel just gave us; PostgreSQL without a Unix
    socket), and every file a process writes (logs, data, gunicorn's heartbeat file,
    TMPDIR) inside the run's directory;
  * each runs in its own process group, so stop() ends it with everything it forked
    (gunicorn's worker, PostgreSQL's backends): SIGTERM (SIGINT for PostgreSQL: its fast
    shutdown), then SIGKILL after a grace period;
  * each dies with its parent (PR_SET_PDEATHSIG), so a harness killed outright leaks
    nothing; an ordinary exit, an exception and Ctrl-C run stop() through `with`, and an
    atexit hook stops anything still running.
Nothing here runs as root: PostgreSQL refuses to, so as root initdb and postgres run as
the `postgres` user (or `nobody`), owning only their data directory.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import pwd
import signal
import subprocess
import sys
import time
import urllib.request
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

from densekv.tools.lab.containers.components import Component
from densekv.tools.lab.containers.config import AppConfig
from densekv.tools.server.process import free_port

_LIVE: weakref.WeakSet[Child] = weakref.WeakSet()


class StartFailed(RuntimeError):
    """A process did not come up; the message ends with the tail of its log."""


def _prctl_deathsig(sig: int) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG


def _preexec(sig: int, user: pwd.struct_passwd | None) -> Callable[[], None]:
    def run() -> None:  # in the child, between fork and exec
        if user is not None:
            os.setgid(user.pw_gid)
            os.setgroups([])
            os.setuid(user.pw_uid)
        _prctl_deathsig(sig)  # after setuid: a credential change clears it

    return run


def cpu_seconds(pids: Sequence[int]) -> float:
    """CPU time used so far by these processes (those that are gone count 0): the
    scheduler's nanoseconds (/proc/PID/schedstat), else utime + stime in clock ticks."""
    total = 0.0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
            continue
        except (OSError, ValueError, IndexError):
            pass
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def group_pids(pgid: int) -> list[int]:
    """Every process of a process group (PostgreSQL's postmaster and its backends)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                    out.append(int(entry.name))
    return out


def unprivileged_user() -> pwd.struct_passwd | None:
    """The account to run PostgreSQL as when we are root (None when we are not)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise StartFailed("running as root and there is no 'postgres' or 'nobody' account to run PostgreSQL as")


def _check_reachable(path: Path, user: pwd.struct_passwd) -> None:
    """PostgreSQL runs as `user`: every directory above the run's must let it through."""
    for parent in Path(path).resolve().parents:
        st = parent.stat()
        if st.st_uid == user.pw_uid or st.st_mode & 0o001 or (st.st_gid == user.pw_gid and st.st_mode & 0o010):
            continue
        raise StartFailed(f"PostgreSQL runs as {user.pw_name!r} here (not as root) and cannot reach the run's "
                          f"directory: {parent} is not traversable by it; run from a directory under /tmp")


class Child:
    """One started process (and its process group)."""

    stop_signal = signal.SIGTERM
    name = "process"

    def __init__(self, rundir: Path) -> None:
        self.rundir = rundir
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = rundir / f"{self.name}.log"

    def spawn(self, argv: list[str], *, env: Mapping[str, str] | None = None,
              user: pwd.struct_passwd | None = None, cwd: Path | None = None) -> None:
        full_env = {**os.environ, "TMPDIR": str(self.rundir), **(env or {})}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         cwd=cwd or self.rundir, env=full_env, start_new_session=True,
                                         preexec_fn=_preexec(self.stop_signal, user))  # noqa: PLW1509 - prctl, setuid
        _LIVE.add(self)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 6) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise StartFailed(f"{what} exited at once (code {code}): {self.log_tail()}")
            with contextlib.suppress(Exception):
                if ready():
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise StartFailed(f"{what} did not answer within {timeout:.0f}s: {self.log_tail()}")
            time.sleep(0.05)

    def stop(self, grace: float = 10.0) -> None:
        stop_all([self], grace)

    def signal_stop(self) -> subprocess.Popen[bytes] | None:
        """Send the stop signal to the process group, without waiting: the process to wait
        for (stop_all signals several, then waits for them together)."""
        proc, self.proc = self.proc, None
        _LIVE.discard(self)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, self.stop_signal)
        return proc

    def start(self, timeout: float = 30.0) -> Any:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if not self.alive():
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_all(children: Sequence[Child], grace: float = 10.0) -> None:
    """Stop several at once: signal every one, then wait; SIGKILL to each whole process
    group afterwards (a worker or backend left behind by its parent goes too)."""
    procs = [p for p in (c.signal_stop() for c in children) if p is not None]
    deadline = time.monotonic() + grace
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


@atexit.register
def _stop_all() -> None:
    with contextlib.suppress(Exception):
        stop_all(list(_LIVE), grace=3)


# -- the app ------------------------------------------------------------------------------

APP = "densekv.tools.lab.containers.app:create_app()"


class AppServer(Child):
    """gunicorn running the app with one sync worker (see app.py for why)."""

    name = "gunicorn"

    def __init__(self, config: AppConfig, rundir: Path, *, workers: int = 1) -> None:
        self.config = config
        self.workers = workers
        self.name = f"gunicorn-{config.container}"
        super().__init__(rundir)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0, *, wait: bool = True) -> AppServer:
        """Start gunicorn; with wait=False return at once (call ready() later), so several
        apps can import Flask at the same time."""
        self.port = free_port()
        argv = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{self.port}",
                "--workers", str(self.workers), "--worker-class", "sync", "--backlog", "2048",
                "--timeout", "600", "--graceful-timeout", "3", "--worker-tmp-dir", str(self.rundir),
                "--no-control-socket", "--log-level", "warning", APP]
        self.spawn(argv, env={**self.config.to_env(), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": _pythonpath()})
        if wait:
            self.ready(timeout)
        return self

    def ready(self, timeout: float = 30.0) -> None:
        self.wait_until(self._healthy, timeout, f"gunicorn ({self.config.container})")

    def _healthy(self) -> bool:
        with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
            return bool(r.status == 200)

    def worker_pids(self) -> list[int]:
        """The worker processes (children of the gunicorn master)."""
        if self.proc is None:
            return []
        try:
            text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]


def _pythonpath() -> str:
    """The worker imports the densekv this process runs (its directory first on the path),
    whatever the worker's directory and however densekv was installed."""
    import densekv

    here = str(Path(densekv.__file__).resolve().parents[1])
    return os.pathsep.join([here, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])


# -- memcached ---------------------------------------------------------------------------


class Memcached(Child):
    name = "memcached"

    def __init__(self, component: Component, rundir: Path, *, megabytes: int = 8192) -> None:
        super().__init__(rundir)
        self.component = component
        self.megabytes = megabytes
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> Memcached:
        self.port = free_port()
        argv = [str(self.component.bins["memcached"]), "-l", "127.0.0.1", "-p", str(self.port), "-U", "0",
                "-m", str(self.megabytes), "-t", "1", "-c", "1024"]
        if os.geteuid() == 0:
            argv += ["-u", "nobody"]  # memcached refuses root without -u
        self.spawn(argv)
        self.wait_until(self._answers, timeout, "memcached")
        return self

    def _answers(self) -> bool:
        from pymemcache.client.base import Client

        client = Client(("127.0.0.1", self.port), connect_timeout=1, timeout=1)
        try:
            return client.version() is not None
        finally:
            client.close()

    def rss(self) -> int:
        """Resident memory of the memcached process, in bytes."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS for memcached")


# -- PostgreSQL --------------------------------------------------------------------------


class Postgres(Child):
    """A throwaway cluster: initdb into RUNDIR/postgres, postgres on a loopback port with
    no Unix socket, trust authentication for the one user `lab`. synchronous_commit is
    off (no container here waits for a disk flush per request)."""

    name = "postgres"
    stop_signal = signal.SIGINT  # fast shutdown

    def __init__(self, component: Component, rundir: Path) -> None:
        super().__init__(rundir)
        self.component = component
        self.port = 0
        self.data = rundir / "postgres" / "data"
        self.user = unprivileged_user()

    @property
    def conninfo(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=lab dbname=postgres connect_timeout=5"

    def start(self, timeout: float = 60.0) -> Postgres:
        home = self.data.parent
        home.mkdir(parents=True, exist_ok=True)
        if self.user is not None:
            _check_reachable(self.rundir, self.user)
            os.chmod(self.rundir, 0o711)  # traversable, not listable, by the postgres account
            os.chown(home, self.user.pw_uid, self.user.pw_gid)
        init = subprocess.run(
            [str(self.component.bins["initdb"]), "-D", str(self.data), "-U", "lab", "--auth=trust",
             "--locale=C", "--encoding=UTF8", "--no-sync"],
            cwd=home, env={**os.environ, "TMPDIR": str(home)}, capture_output=True, text=True, timeout=120,
            check=False, preexec_fn=_preexec(signal.SIGKILL, self.user))
        if init.returncode != 0:
            raise StartFailed(f"initdb failed (exit {init.returncode}): {(init.stderr or init.stdout).strip()[-300:]}")
        self.port = free_port()
        argv = [str(self.component.bins["postgres"]), "-D", str(self.data), "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                "-c", "synchronous_commit=off", "-c", "shared_buffers=256MB", "-c", "max_connections=20",
                "-c", "logging_collector=off", "-c", "log_min_messages=warning"]
        self.log = home / "postgres.log"
        self.spawn(argv, user=self.user, cwd=home)
        self.wait_until(self._answers, timeout, "postgres")
        return self

    def _answers(self) -> bool:
        import psycopg

        with psycopg.connect(self.conninfo) as conn:
            return conn.execute("SELECT 1").fetchone() is not None
