"""Webhooks as an attacker would use them: a URL that makes the control plane probe
our own network (blind SSRF) is refused when stored, and again at delivery when the name
resolves into a refused range; any error of one delivery is recorded on it and retried, and
never stops another organisation's delivery in the same pass."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from uuid import UUID

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.errors import InvalidInput
from control_plane.notifications.addresses import IPAddress, WebhookAddressPolicy
from control_plane.notifications.delivery import DeliveryPolicy, WebhookSender
from control_plane.reconcile.passes import PassSettings, ReconcilePass
from control_plane.registry import Services, build_services
from control_plane.types import Pool
from signed_release.keys import key_id
from tests.control_plane.conftest import Api
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, Fleet
from tests.worlds.clocks import ManualClock

SECRET = "a-shared-secret-of-enough-length"
LOOPBACK = WebhookAddressPolicy.allowing(["127.0.0.0/8"])


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://169.254.169.254/latest/meta-data/", id="cloud_metadata"),
        pytest.param("http://[fd00:ec2::254]/latest/", id="cloud_metadata_ipv6"),
        pytest.param("http://127.0.0.1:6379/", id="loopback"),
        pytest.param("http://127.1/", id="loopback_short_form"),
        pytest.param("http://2130706433/", id="loopback_as_one_number"),
        pytest.param("http://0x7f000001/", id="loopback_in_hex"),
        pytest.param("http://localhost:8080/", id="localhost"),
        pytest.param("http://api.localhost/", id="localhost_subdomain"),
        pytest.param("http://[::1]/", id="ipv6_loopback"),
        pytest.param("http://[::ffff:127.0.0.1]/", id="ipv4_mapped_loopback"),
        pytest.param("http://[fe80::1]/", id="ipv6_link_local"),
        pytest.param("http://10.1.2.3/", id="private_10"),
        pytest.param("http://172.16.0.1/", id="private_172"),
        pytest.param("http://192.168.1.1/", id="private_192"),
        pytest.param("http://[fc00::1]/", id="ipv6_unique_local"),
        pytest.param("http://100.64.0.1/", id="shared_address_space"),
        pytest.param("http://0.0.0.0/", id="unspecified"),
        pytest.param("http://224.0.0.1/", id="multicast"),
        pytest.param("http://255.255.255.255/", id="broadcast"),
        pytest.param("https://hooks.example.com:99999/", id="port_out_of_range"),
        pytest.param("https://hooks.example.com:0/", id="port_zero"),
        pytest.param("https://hooks.example.com:http/", id="port_not_a_number"),
        pytest.param("http://[::1/", id="unbalanced_bracket"),
        pytest.param("gopher://hooks.example.com/", id="other_scheme"),
    ],
)
def test_a_url_into_our_network_is_refused_when_stored(
    api: Api, pool: Pool, make_org: Any, url: str
) -> None:
    org = make_org("Acme")
    with api.client(org.panel_key) as client:
        response = client.put("/v1/webhook", json={"url": url})
    assert response.status_code == 422, response.text
    assert response.json()["detail"]["message"].startswith("url: ")
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM webhooks").fetchone() == {"n": 0}


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("https://hooks.example.com/nachtwacht", id="public_name"),
        pytest.param("https://93.184.216.34:8443/hook", id="public_address"),
        pytest.param("http://[2606:2800:220:1::1]/hook", id="public_ipv6"),
    ],
)
def test_a_public_url_is_stored(api: Api, make_org: Any, url: str) -> None:
    org = make_org("Acme")
    with api.client(org.panel_key) as client:
        assert client.put("/v1/webhook", json={"url": url}).status_code == 200


def test_an_operator_setting_allows_a_network_and_only_that(
    pool: Pool, release_key: Ed25519PrivateKey, clock: ManualClock
) -> None:
    public = release_key.public_key()
    services = build_services(
        pool,
        {key_id(public): public},
        webhook_policy=WebhookAddressPolicy.allowing(["10.0.0.0/8"]),
    )
    org = services.accounts.create_org("Acme", now=clock.now()).org_id
    saved = services.webhooks.put(org, url="http://10.1.2.3/hook", secret=SECRET, now=clock.now())
    assert saved.url == "http://10.1.2.3/hook"
    with pytest.raises(InvalidInput, match="link-local"):
        services.webhooks.put(org, url="http://169.254.169.254/", secret=SECRET, now=clock.now())
    assert services.webhooks.get(org).url == "http://10.1.2.3/hook"


# -- at delivery ------------------------------------------------------------------------------


class Receiver:
    def __init__(self) -> None:
        self.paths: list[str] = []
        received = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                received.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


@pytest.fixture
def loopback_services(pool: Pool, release_key: Ed25519PrivateKey) -> Services:
    """The operator setting the test receivers need: webhooks may reach 127.0.0.0/8."""
    public = release_key.public_key()
    return build_services(pool, {key_id(public): public}, webhook_policy=LOOPBACK)


@pytest.fixture
def fleet(pool: Pool, loopback_services: Services, clock: ManualClock) -> Iterator[Fleet]:
    made = Fleet(pool, loopback_services, clock)
    yield made
    made.close()


def _org_with_webhook(fleet: Fleet, services: Services, name: str, url: str) -> UUID:
    org = fleet.org(name)
    services.webhooks.put(org, url=url, secret=SECRET, now=fleet.clock.now())
    fleet.agent(org, f"{name}-web-01")  # misses the night: one notification for the org
    return org


def _pass_with(pool: Pool, services: Services, resolve: Any) -> ReconcilePass:
    sender = WebhookSender(
        pool,
        DeliveryPolicy(max_attempts=2, first_backoff=timedelta(minutes=1)),
        addresses=services.webhook_policy,
        resolve=resolve,
    )
    return ReconcilePass(pool, sender=sender, settings=PassSettings(), identity="attacks")


def _deliveries(fleet: Fleet) -> dict[UUID, dict[str, Any]]:
    return {
        row["org_id"]: row
        for row in fleet.rows("SELECT org_id, state, attempts, last_error FROM webhook_deliveries")
    }


def test_a_name_that_resolves_into_a_refused_range_is_not_contacted(
    pool: Pool, fleet: Fleet, loopback_services: Services
) -> None:
    # Stored while the name pointed elsewhere; now its DNS answers the metadata address.
    org = _org_with_webhook(fleet, loopback_services, "acme", "http://hooks.example.com/hook")
    contacted: list[str] = []

    def resolve(host: str, port: int) -> list[IPAddress]:
        contacted.append(host)
        return [ipaddress.ip_address("169.254.169.254")]

    reconcile = _pass_with(pool, loopback_services, resolve)
    reconcile.run(AFTER_NIGHT)
    delivery = _deliveries(fleet)[org]
    assert (delivery["state"], delivery["attempts"]) == ("pending", 1)
    assert delivery["last_error"].startswith("address refused: 'hooks.example.com' resolves to")
    reconcile.run(AFTER_NIGHT + timedelta(minutes=1))  # retried by its policy, then given up
    assert _deliveries(fleet)[org]["state"] == "failed"
    assert contacted == ["hooks.example.com", "hooks.example.com"]


def test_one_refused_address_among_several_refuses_the_name(
    pool: Pool, fleet: Fleet, loopback_services: Services
) -> None:
    org = _org_with_webhook(fleet, loopback_services, "acme", "http://hooks.example.com/hook")

    def resolve(host: str, port: int) -> list[IPAddress]:
        return [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("10.0.0.7")]

    _pass_with(pool, loopback_services, resolve).run(AFTER_NIGHT)
    assert "10.0.0.7 is a private address" in _deliveries(fleet)[org]["last_error"]


def test_a_name_that_does_not_resolve_is_a_recorded_error(
    pool: Pool, fleet: Fleet, loopback_services: Services
) -> None:
    org = _org_with_webhook(fleet, loopback_services, "acme", "http://hooks.example.com/hook")

    def resolve(host: str, port: int) -> list[IPAddress]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    _pass_with(pool, loopback_services, resolve).run(AFTER_NIGHT)
    delivery = _deliveries(fleet)[org]
    assert (delivery["state"], delivery["attempts"]) == ("pending", 1)
    assert delivery["last_error"].startswith("gaierror")


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(RuntimeError("resolver exploded"), id="runtime_error"),
        pytest.param(UnicodeError("label too long"), id="unicode_error"),
        pytest.param(KeyError("surprise"), id="key_error"),
    ],
)
def test_one_organisations_unexpected_error_never_stops_anothers_delivery(
    pool: Pool, fleet: Fleet, loopback_services: Services, receiver: Receiver, failure: Exception
) -> None:
    broken = _org_with_webhook(fleet, loopback_services, "broken", "http://broken.example.com/hook")
    healthy = _org_with_webhook(
        fleet, loopback_services, "healthy", f"http://127.0.0.1:{receiver.port}/healthy"
    )
    # The broken organisation's delivery is tried first in the pass.
    fleet.sql("UPDATE webhook_deliveries SET next_attempt_at = next_attempt_at - interval '1 s'")

    def resolve(host: str, port: int) -> list[IPAddress]:
        if host == "broken.example.com":
            raise failure
        return [ipaddress.ip_address("127.0.0.1")]

    report = _pass_with(pool, loopback_services, resolve).run(AFTER_NIGHT)
    deliveries = _deliveries(fleet)
    assert deliveries[healthy]["state"] == "delivered"
    assert receiver.paths == ["/healthy"]
    assert deliveries[broken]["state"] == "pending"
    assert deliveries[broken]["last_error"].startswith(type(failure).__name__)
    assert sorted(outcome.outcome for outcome in report.deliveries) == ["delivered", "retry"]


def test_an_address_refused_for_where_it_points_has_its_own_code(api: Api, make_org: Any) -> None:
    """The API says a well-formed address the policy refuses apart from a malformed one."""
    org = make_org("Acme")
    with api.client(org.panel_key) as client:
        loopback = client.put("/v1/webhook", json={"url": "http://127.0.0.1:6379/"})
        malformed = client.put("/v1/webhook", json={"url": "gopher://hooks.example.com/"})
    assert loopback.json()["detail"]["code"] == "address_refused"
    assert malformed.json()["detail"]["code"] == "invalid_input"
