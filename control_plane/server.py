"""`nachtwacht control serve`: one process, or a supervisor and N forked workers, sharing one
listening socket.

Start-up order: clock → socket (a taken port fails before anything starts) → database
(embedded or URL) → migrations → settings → the sessions it may open against what the database
allows (`connection_budget`, a warning) → workers. Each worker owns its requests' connection
pool (every connection opened with the requests' lock and statement timeouts), its services, the
refusal flusher and the reconcile loop (on a small pool of its own, with the lock timeout only; the
advisory lock makes one worker of all replicas the reconcile leader), and runs uvicorn on uvloop
with httptools over the inherited socket; the kernel spreads connections between them. The caps
hold across workers as they do across replicas: the database enforces them. The "ready" line
comes once every worker accepts.

SIGTERM and SIGINT stop uvicorn gracefully (in every worker: the supervisor forwards them); then
each pool closes and the embedded PostgreSQL is let go (stopped, unless another of our processes
still uses it). A supervisor that dies without forwarding anything (SIGKILL, a crash) takes its
workers with it: each asks the kernel, right after the fork, for a SIGTERM when its parent dies
(Linux's parent-death signal), so none is left serving the port on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

import uvicorn
import uvloop
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from control_plane import schema_version
from control_plane.answers_cache import AnswerMemory, ReplicaWrites
from control_plane.answers_cache.feed import feed_running
from control_plane.api.app import create_app
from control_plane.config import ServeSettings, load_trusted_keys
from control_plane.connection_budget import say_the_budget
from control_plane.database import connect, open_pool, reconcile_bounds
from control_plane.errors import ConfigurationError, ControlPlaneError, DatabaseUnavailable
from control_plane.events.trail import Actor
from control_plane.ready_line import ready_line
from control_plane.reconcile import reconcile_running
from control_plane.registry import build_services, replica_identity
from control_plane.replica_sessions import replica_session_name
from control_plane.secret_links import ACCESS_LOGGER, SecretLinksHidden
from control_plane.startup import opened_database
from ground.clock import Clock, clock_from_env
from ground.contract.plain_text import inert
from ground.start_up import set_aside_start_up_objects

__all__ = ["serve", "uvicorn_options"]

# How long the reconcile worker waits for a connection of its own pool (it is alone on it).
RECONCILE_POOL_WAIT_SECONDS = 30.0
# A deadline for a worker that hangs while starting, not a speed expectation.
WORKER_START_DEADLINE_SECONDS = 120.0
# <linux/prctl.h>: the signal the calling process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


class _Stop(Exception):
    """Raised from a signal handler after uvicorn has shut down gracefully."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    del frame
    raise _Stop(signal.Signals(signum).name)


def _announce_clock(clock: Clock) -> None:
    if clock.is_fake:
        banner = "!" * 78
        print(f"{banner}\n!!! {clock.describe()}\n{banner}", file=sys.stderr, flush=True)


def _listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(
            f"--host/--port: cannot listen on {host}:{port} ({exc.strerror or exc})"
        ) from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def uvicorn_options(log_level: str) -> dict[str, Any]:
    """uvicorn's server options, shared with the benchmark's bare baseline app.

    httptools parses HTTP/1.1 in C (h11 is pure Python); the access log is one formatted line
    and a logging call per request, so it is on only when asked for (`--log-level info`)."""
    return {
        "http": "httptools",
        "log_level": log_level,
        "access_log": log_level in {"debug", "info"},
    }


async def _run(server: uvicorn.Server, sock: socket.socket, ready: Callable[[], None]) -> None:
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if server.started:
        ready()
    await task


def _serve_worker(
    url: str,
    settings: ServeSettings,
    clock: Clock,
    trusted_keys: Mapping[str, Ed25519PublicKey],
    sock: socket.socket,
    writes: ReplicaWrites,
    ready: Callable[[], None],
) -> None:
    """One worker: its pool, services and reconcile loop, uvicorn until a signal stops it;
    `writes` is the replica's count of writes, shared by its workers. Its sessions name it
    (`replica_sessions`): `after-restore` refuses to run while they are connected."""
    identity = replica_identity()
    session_name = replica_session_name(identity)
    # The requests' pool: every statement bounded in how long it waits for a lock and runs.
    pool = open_pool(
        url,
        min_size=1,
        max_size=settings.pool_size,
        timeout=settings.pool_wait_seconds,
        bounds=settings.request_bounds,
        application_name=session_name,
    )
    try:
        # The reconcile worker's own: its passes may run longer than a request may, and a pass
        # that waits for a lock holds none of the requests' connections; it waits for a lock no
        # longer than a request does (`database`).
        worker_pool = open_pool(
            url,
            min_size=1,
            max_size=2,
            timeout=RECONCILE_POOL_WAIT_SECONDS,
            bounds=reconcile_bounds(settings.request_bounds),
            application_name=session_name,
        )
    except BaseException:
        pool.close()
        raise
    try:
        services = build_services(
            pool,
            trusted_keys,
            replica=identity,
            webhook_policy=settings.webhook_policy,
            answers=AnswerMemory(writes=writes),
        )
        config = uvicorn.Config(
            create_app(services, clock, database_threads=settings.pool_size),
            lifespan="off",
            **uvicorn_options(settings.log_level),
        )
        # After the Config, which sets up uvicorn's loggers: no secret link in the access log.
        logging.getLogger(ACCESS_LOGGER).addFilter(SecretLinksHidden())
        # The app and its routes live as long as the worker: out of the collector's way too.
        set_aside_start_up_objects()
        # uvloop: the event loop's own overhead per request is a fraction of asyncio's.
        with (
            reconcile_running(worker_pool, clock, url, services),
            # The agents' answers from memory, kept exact by the change feed.
            feed_running(url, services.answers, services.seen, application_name=session_name),
            asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
        ):
            runner.run(_run(uvicorn.Server(config), sock, ready))
    finally:
        worker_pool.close()
        pool.close()


def _store_platform_settings(url: str, settings: ServeSettings, clock: Clock) -> None:
    if not settings.platform_settings:
        return
    pool = open_pool(url, min_size=1, max_size=1)
    try:
        build_services(pool).settings.update(
            settings.platform_settings,
            now=clock.now(),
            actor=Actor(kind="operator", name="serve flags"),
        )
    finally:
        pool.close()


def _end_with(supervisor: int) -> None:
    """In a worker just forked: SIGTERM (the graceful stop) when `supervisor` dies, whatever
    kills it. The kernel sends it when the parent ends; a parent that ended before the request
    was made is seen by `getppid`, and the worker stops at once."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the supervisor's SIGTERM is the only stop
        return
    if prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_PDEATHSIG): {os.strerror(error)}")
    if os.getppid() != supervisor:
        raise _Stop("the supervisor ended before this worker started")


def _fork_worker(start: Callable[[Callable[[], None]], None]) -> tuple[int, int]:
    """A child process running `start`; returns its pid and the pipe it reports ready on."""
    readable, writable = os.pipe()
    supervisor = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(readable)

        def ready() -> None:
            os.write(writable, b"r")

        code = 0
        try:
            _end_with(supervisor)
            start(ready)
        except _Stop:
            pass
        except ControlPlaneError as exc:
            print(f"nachtwacht control serve: worker {os.getpid()}: {exc}", file=sys.stderr)
            code = 1
        except BaseException as exc:  # a worker must never fall back into the supervisor's code
            print(f"nachtwacht control serve: worker {os.getpid()}: {exc!r}", file=sys.stderr)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    os.close(writable)
    return pid, readable


def _await_ready(pipes: list[int]) -> bool:
    """True once every worker wrote its ready byte; False when one closed its pipe first."""
    waiting = set(pipes)
    deadline = time.monotonic() + WORKER_START_DEADLINE_SECONDS
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        readable, _, _ = select.select(list(waiting), [], [], left)
        for fd in readable:
            if not os.read(fd, 1):
                return False
            waiting.discard(fd)
    return True


def _stop_workers(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _supervise(workers: int, start: Callable[[Callable[[], None]], None], url: str) -> int:
    """Fork `workers` workers, print the ready line once all accept, wait; a worker that dies
    stops the others (a half-sized server would hide its failure behind the survivors)."""
    pids: list[int] = []
    pipes: list[int] = []
    try:
        for _ in range(workers):
            pid, pipe = _fork_worker(start)
            pids.append(pid)
            pipes.append(pipe)
        if not _await_ready(pipes):
            raise DatabaseUnavailable("a worker failed to start (its reason is above)")
        print(ready_line(url), flush=True)
        ended, status = os.wait()
        pids = [pid for pid in pids if _still_running(pid)]
        print(
            f"nachtwacht control serve: a worker (pid {ended}) {_how_it_ended(status)}; "
            "stopping the others",
            file=sys.stderr,
            flush=True,
        )
        return 1
    finally:
        _stop_workers(pids)
        for pipe in pipes:
            os.close(pipe)


def _how_it_ended(status: int) -> str:
    """A wait status in words: `was killed by SIGKILL`, `exited with status 1`."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"was killed by {signal.Signals(number).name}"
        except ValueError:
            return f"was killed by signal {number}"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"ended (wait status {status:#x})"


def _still_running(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


class InertLines(logging.Formatter):
    """A log line as the terminal gets it: inert (`ground.contract.plain_text.inert`), each
    control character but newline and tab, and each bidirectional control, as its escape.
    A line may quote stored text (a name, an agent's error from before text was made inert where
    it is stored); the terminal that shows the log reads it, it does not obey it."""

    def format(self, record: logging.LogRecord) -> str:
        return inert(super().format(record))


def _show_the_logs() -> None:
    # The operators' trail is one line per action on stderr whatever --log-level says: it is
    # the record of who stopped or changed what, not diagnostics.
    trail = logging.getLogger("control_plane.trail")
    if not trail.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(InertLines("%(asctime)s nachtwacht trail: %(message)s"))
        trail.addHandler(handler)
        # Its lines are written once, by its own handler, not again by the one below.
        trail.propagate = False
    trail.setLevel(logging.INFO)
    # The control plane's warnings, as Python's last resort wrote them (the message alone, from
    # WARNING up), inert.
    control_plane = logging.getLogger("control_plane")
    if not control_plane.handlers:
        warnings = logging.StreamHandler(sys.stderr)
        warnings.setLevel(logging.WARNING)
        warnings.setFormatter(InertLines("%(message)s"))
        control_plane.addHandler(warnings)


def serve(settings: ServeSettings) -> int:
    clock = clock_from_env()
    _announce_clock(clock)
    _show_the_logs()
    trusted_keys = load_trusted_keys(settings.release_public_keys)
    # uvicorn restores these after its graceful shutdown and re-raises the signal it caught.
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    sock = _listening_socket(settings.host, settings.port)
    code = 0
    try:
        with opened_database(settings.database, migrate_to_head=settings.migrate) as url:
            if not settings.migrate:
                schema_version.require_head(url)
            _store_platform_settings(url, settings, clock)
            with connect(url) as conn:
                say_the_budget(conn, workers=settings.workers, pool_size=settings.pool_size)

            # Before the fork: every worker counts its writes where the others see them.
            writes = ReplicaWrites()

            def start(ready: Callable[[], None]) -> None:
                _serve_worker(url, settings, clock, trusted_keys, sock, writes, ready)

            # Before the fork: the workers inherit the start-up heap frozen, so their own
            # collections never walk (and copy) its pages (ground/start_up.py).
            set_aside_start_up_objects()

            if settings.workers == 1:
                start(lambda: print(ready_line(_url(sock)), flush=True))
            else:
                code = _supervise(settings.workers, start, _url(sock))
    except _Stop:
        pass
    finally:
        sock.close()
    print("nachtwacht control plane stopped", file=sys.stderr, flush=True)
    return code
