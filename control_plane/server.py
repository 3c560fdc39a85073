"""`nachtwacht control serve`: one process that owns its database connection pool and HTTP socket.

Start-up order: clock → socket (a taken port fails before anything starts) → database
(embedded or URL) → migrations → pool → settings → "ready" line. SIGTERM and SIGINT stop uvicorn
gracefully; then the pool closes and the embedded PostgreSQL is let go (stopped, unless another of
our processes still uses it).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
from types import FrameType

import uvicorn

from control_plane import migrate
from control_plane.api.app import create_app
from control_plane.config import ServeSettings, load_trusted_keys
from control_plane.database import open_pool
from control_plane.errors import ConfigurationError
from control_plane.events.trail import Actor
from control_plane.ready_line import ready_line
from control_plane.reconcile import reconcile_running
from control_plane.registry import build_services
from control_plane.startup import opened_database
from ground.clock import Clock, clock_from_env

__all__ = ["serve"]


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


async def _run(server: uvicorn.Server, sock: socket.socket) -> None:
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if server.started:
        print(ready_line(_url(sock)), flush=True)
    await task


def _show_the_trail() -> None:
    # The operators' trail is one line per action on stderr whatever --log-level says: it is
    # the record of who stopped or changed what, not diagnostics.
    trail = logging.getLogger("control_plane.trail")
    if not trail.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s nachtwacht trail: %(message)s"))
        trail.addHandler(handler)
    trail.setLevel(logging.INFO)


def serve(settings: ServeSettings) -> int:
    clock = clock_from_env()
    _announce_clock(clock)
    _show_the_trail()
    trusted_keys = load_trusted_keys(settings.release_public_keys)
    # uvicorn restores these after its graceful shutdown and re-raises the signal it caught.
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    sock = _listening_socket(settings.host, settings.port)
    try:
        with opened_database(settings.database, migrate_to_head=settings.migrate) as url:
            if not settings.migrate:
                migrate.require_head(url)
            pool = open_pool(url, min_size=1, max_size=settings.pool_size)
            try:
                services = build_services(
                    pool, trusted_keys, webhook_policy=settings.webhook_policy
                )
                if settings.platform_settings:
                    services.settings.update(
                        settings.platform_settings,
                        now=clock.now(),
                        actor=Actor(kind="operator", name="serve flags"),
                    )
                config = uvicorn.Config(
                    create_app(services, clock),
                    log_level=settings.log_level,
                    lifespan="off",
                    access_log=settings.log_level in {"debug", "info"},
                )
                with reconcile_running(pool, clock, url, services):
                    asyncio.run(_run(uvicorn.Server(config), sock))
            finally:
                pool.close()
    except _Stop:
        pass
    finally:
        sock.close()
    print("nachtwacht control plane stopped", file=sys.stderr, flush=True)
    return 0
