"""Helpers for the panel's tests of the newer screens: a world whose webhooks may reach loopback,
a real webhook receiver on 127.0.0.1 that checks signatures, releases published through the real
release service on the server's database."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.database import open_pool
from control_plane.notifications.delivery import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    verify_signature,
)
from control_plane.releases.services import ReleaseService
from tests.panel.conftest import PanelWorld
from tests.worlds.releases import ReleaseFactory

WEBHOOK_SECRET = "a-test-secret-of-the-receiver-0123"


@dataclass
class Receiver:
    """What the receiver got: each body and whether its signature checked out."""

    answer: int = 204
    received: list[tuple[bytes, bool]] = field(default_factory=list)
    url: str = ""


@contextlib.contextmanager
def webhook_receiver(answer: int = 204, *, now: datetime) -> Iterator[Receiver]:
    """A real HTTP server on loopback that checks the signature as a customer's would."""
    got = Receiver(answer=answer)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            good = verify_signature(
                WEBHOOK_SECRET,
                body=body,
                timestamp=self.headers.get(TIMESTAMP_HEADER, ""),
                signature=self.headers.get(SIGNATURE_HEADER, ""),
                now=now,
            )
            got.received.append((body, good))
            self.send_response(got.answer)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()


def set_webhook(world: PanelWorld, url: str) -> None:
    with psycopg.connect(world.server.database_url) as conn:
        conn.execute(
            "INSERT INTO webhooks (org_id, url, secret, updated_at) VALUES (%s, %s, %s, now())"
            " ON CONFLICT (org_id) DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret",
            [world.org_id, url, WEBHOOK_SECRET],
        )


def publish_releases(
    world: PanelWorld,
    *versions: tuple[str, int],
    channel: str = "stable",
    platform: str = "linux-x86_64",
) -> None:
    """Publish (version, manifest_version) releases of `channel`/`platform` through the real
    release service, signed with a key it trusts, into the server's database."""
    key = Ed25519PrivateKey.generate()
    factory = ReleaseFactory(key=key)
    pool = open_pool(world.server.database_url, min_size=1, max_size=1)
    try:
        service = ReleaseService(pool, factory.trusted)
        for version, manifest_version in versions:
            content = version.encode() * 100
            release = factory.sign(
                content,
                version=version,
                manifest_version=manifest_version,
                channel=channel,
                platform=platform,
                issued_at=datetime(2026, 11, 1, tzinfo=UTC),
                unpacked_size=len(content) * 2,
                expires_in=datetime(2027, 11, 1, tzinfo=UTC) - datetime(2026, 11, 1, tzinfo=UTC),
            )
            service.publish(
                release.manifest_bytes,
                release.signature,
                release.artifact,
                now=datetime(2027, 3, 26, 10, tzinfo=UTC),
            )
    finally:
        pool.close()


def agent_reports(world: PanelWorld, version: str) -> None:
    """The agent reported `version` (what the fleet picture and "who runs it" read)."""
    with psycopg.connect(world.server.database_url) as conn:
        conn.execute(
            "UPDATE agents SET current_version = %s WHERE id = %s", [version, world.agent_id]
        )
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, version,"
            " created_at, finished_at) VALUES (%s, %s, 'schedule', '2027-03-23T03:00',"
            " '2027-03-23T02:00Z', 'succeeded', %s, '2027-03-26T10:00Z', '2027-03-26T10:05Z')",
            [world.agent_id, world.org_id, version],
        )
