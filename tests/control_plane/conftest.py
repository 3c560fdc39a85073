"""Fixtures for the control plane's own tests: a pool on the test's database, a clock the test
sets, the API served over real HTTP on loopback (uvicorn in a thread), and bootstrap helpers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest
import uvicorn
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.api.app import create_app
from control_plane.database import open_pool
from control_plane.registry import Services, build_services
from control_plane.types import Pool
from signed_release.keys import key_id
from signed_release.manifest import Product
from tests.control_plane.reconcile_fleet import Fleet
from tests.worlds.clocks import ManualClock
from tests.worlds.releases import ReleaseFactory
from tests.worlds.rows import rows_in


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 11, 30, 1, 0, tzinfo=UTC))


@pytest.fixture
def pool(database_url: str) -> Iterator[Pool]:
    opened = open_pool(database_url, min_size=1, max_size=8)
    # Its first connection made before the test asks for one: on a machine loaded by other
    # workers that alone can take longer than a request's wait for a connection (3 s), which
    # failed a fixture's set-up now and then. Requests still wait as the product's do.
    opened.wait(timeout=60)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def release_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture
def services(pool: Pool, clock: ManualClock, release_key: Ed25519PrivateKey) -> Services:
    public = release_key.public_key()
    return build_services(pool, {key_id(public): public})


@dataclass(frozen=True)
class SignedRelease:
    manifest: bytes
    signature: bytes
    artifact: bytes
    version: str
    manifest_version: int


def sign_release(
    key: Ed25519PrivateKey,
    *,
    version: str = "1.5.0",
    manifest_version: int = 42,
    artifact: bytes | None = None,
    issued_at: datetime = datetime(2026, 11, 1, tzinfo=UTC),
    expires: datetime = datetime(2027, 11, 1, tzinfo=UTC),
    channel: str = "stable",
    platform: str = "linux-x86_64",
    allow_downgrade: bool = False,
    product: Product = "agent",
) -> SignedRelease:
    content = artifact if artifact is not None else bytes(range(256)) * 40
    release = ReleaseFactory(key=key).sign(
        content,
        version=version,
        manifest_version=manifest_version,
        issued_at=issued_at,
        expires_in=expires - issued_at,
        unpacked_size=len(content) * 2,
        channel=channel,
        platform=platform,
        allow_downgrade=allow_downgrade,
        product=product,
    )
    return SignedRelease(
        manifest=release.manifest_bytes,
        signature=release.signature,
        artifact=content,
        version=version,
        manifest_version=manifest_version,
    )


@pytest.fixture
def published(
    services: Services, release_key: Ed25519PrivateKey, clock: ManualClock
) -> SignedRelease:
    """Release 1.5.0 (manifest_version 42), signed with the trusted key and published."""
    release = sign_release(release_key)
    services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now()
    )
    return release


@dataclass
class Api:
    base_url: str
    services: Services

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30)


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


class ThreadedServer:
    """The app served by uvicorn in a thread on 127.0.0.1 (real HTTP), for a `with` block."""

    def __init__(self, services: Services, clock: ManualClock) -> None:
        self._sock = _free_socket()
        self._server = uvicorn.Server(
            uvicorn.Config(create_app(services, clock), log_level="warning", lifespan="off")
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        host, port = self._sock.getsockname()
        self.base_url = f"http://{host}:{port}"

    def __enter__(self) -> ThreadedServer:
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            threading.Event().wait(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join()
        self._sock.close()


def serve_in_thread(services: Services, clock: ManualClock) -> ThreadedServer:
    return ThreadedServer(services, clock)


@pytest.fixture
def api(services: Services, clock: ManualClock) -> Iterator[Api]:
    """The API over real HTTP on 127.0.0.1, backed by the test's database and clock."""
    with serve_in_thread(services, clock) as server:
        yield Api(base_url=server.base_url, services=services)


@dataclass(frozen=True)
class Org:
    org_id: str
    panel_key: str


@dataclass(frozen=True)
class Agent:
    agent_id: str
    org_id: str
    agent_key: str


@pytest.fixture
def fleet(pool: Pool, services: Services, clock: ManualClock) -> Iterator[Fleet]:
    """Organisations and agents with schedules, and the reconcile worker's passes over them
    (`reconcile_fleet.Fleet`)."""
    made = Fleet(pool, services, clock)
    yield made
    made.close()


@pytest.fixture
def make_org(services: Services, clock: ManualClock) -> Callable[[str], Org]:
    def make(name: str = "Acme") -> Org:
        issued = services.accounts.create_org(name, now=clock.now())
        return Org(org_id=str(issued.org_id), panel_key=issued.panel_key)

    return make


@pytest.fixture
def make_agent(services: Services, clock: ManualClock) -> Callable[[Org, str], Agent]:
    def make(org: Org, name: str = "web-01") -> Agent:
        from uuid import UUID

        issued = services.accounts.enroll_agent(UUID(org.org_id), name, now=clock.now())
        return Agent(agent_id=str(issued.agent_id), org_id=org.org_id, agent_key=issued.agent_key)

    return make


@pytest.fixture
def operator_key(services: Services) -> str:
    return services.accounts.create_operator_key("tests")


def table_rows(pool: Pool, tables: Sequence[str]) -> dict[str, list[str]]:
    """Every row of each table as JSON text, sorted: equal before and after a request that was
    refused means it changed nothing there."""
    with pool.connection() as conn:
        return rows_in(conn, tables)
