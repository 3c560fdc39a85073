"""An organisation's OpenID Connect provider is reached under the outbound address policy, as a
webhook is: an issuer, token endpoint or key set at a loopback, private or link-local address is
refused — when it is saved and at every sign-in — unless the operator allowed its network, and
nothing is sent to it. The provider here listens on 127.0.0.1, so a refusal is proved by the
provider never being asked."""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest

from control_plane.accounts.oidc import OidcFailed, OidcProvider, begin
from control_plane.notifications.addresses import IPAddress, WebhookAddressPolicy
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.oidc_provider import CLIENT_ID, CLIENT_SECRET, Provider, running_provider
from tests.panel.people_support import invite, save_oidc


@pytest.fixture
def provider() -> Iterator[Provider]:
    with running_provider() as running:
        yield running


def _save(world: PanelWorld, issuer: str) -> str:
    with sign_in_client(world, world.panel_key) as editor:
        page = editor.get("/panel/people")
        saved = editor.post(
            "/panel/people/oidc",
            data={
                "csrf": csrf_of(page.text),
                "issuer": issuer,
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
            },
        )
        assert saved.status_code == 422, saved.text
        return saved.text


def test_an_issuer_on_loopback_is_refused_at_save_and_never_asked(
    panel_world: PanelWorld, provider: Provider
) -> None:
    shown = _save(panel_world, provider.url)
    assert "Issuer URL" in shown and provider.url in shown
    assert "public addresses" in shown
    assert provider.requests == []
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        assert "/panel/oidc/start/" not in editor.get("/panel/people").text  # nothing was saved


@pytest.mark.parametrize(
    "issuer",
    ["http://[::1]:9/", "https://10.20.30.40/realm", "https://169.254.169.254/latest/meta-data"],
)
def test_an_issuer_at_a_private_address_is_refused_at_save_naming_it(
    panel_world: PanelWorld, issuer: str
) -> None:
    shown = _save(panel_world, issuer)
    assert issuer.replace("&", "&amp;") in shown
    assert "public addresses" in shown


def _stored_before(world: PanelWorld, issuer: str) -> None:
    """A provider saved before the policy applied to providers (or while the operator allowed
    its network): the sign-in checks it again."""
    with psycopg.connect(world.server.database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO oidc_providers (org_id, issuer, client_id, client_secret, updated_at)"
            " VALUES (%s, %s, %s, %s, now())",
            [world.org_id, issuer, CLIENT_ID, CLIENT_SECRET],
        )


def test_an_issuer_on_loopback_is_refused_at_sign_in_and_never_asked(
    panel_world: PanelWorld, provider: Provider
) -> None:
    _stored_before(panel_world, provider.url)
    with panel_world.client() as anna:
        start = anna.get(f"/panel/oidc/start/{panel_world.org_id}")
    assert start.status_code == 401
    assert f"issuer {provider.url} (" in start.text  # the issuer as saved, not the discovery
    assert "does not connect to" in start.text
    assert provider.requests == []


@pytest.mark.parametrize(
    ("field", "url"),
    [
        ("jwks_uri", "http://10.1.2.3/jwks"),
        ("jwks_uri", "https://169.254.169.254/latest/meta-data"),
        ("token_endpoint", "https://[fd00::1]/token"),
    ],
)
def test_an_endpoint_the_discovery_names_at_a_private_address_is_refused(
    loopback_world: PanelWorld, provider: Provider, field: str, url: str
) -> None:
    with sign_in_client(loopback_world, loopback_world.panel_key) as editor:
        saved = save_oidc(editor, provider.url, CLIENT_ID)
        assert saved.status_code == 303, saved.text
        invite(editor, "Anna de Vries", "anna@example.com", "editor")
    provider.endpoints = {field: url}
    with loopback_world.client() as anna:
        start = anna.get(f"/panel/oidc/start/{loopback_world.org_id}")
        at_provider = anna.get(start.headers["location"])
        back = anna.get(at_provider.headers["location"])
        assert back.status_code == 401
        assert field in back.text and url.replace("&", "&amp;") in back.text
        assert anna.get("/panel/agents").status_code == 303
    # Neither endpoint was asked: the code and the client's secret went nowhere.
    assert provider.token_requests == []
    assert "/jwks" not in provider.requests


def test_a_name_that_resolves_to_a_private_address_is_refused_before_connecting() -> None:
    """The check at sign-in is on what the name resolves to, and the connection would go to the
    checked address (a seam test: the resolver is the one part replaced)."""
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        return [ipaddress.ip_address("10.0.0.5")]

    provider = OidcProvider(
        org_id=uuid.uuid4(),
        issuer="https://idp.example.com/realm",
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        updated_at=datetime.now(UTC),
    )
    with pytest.raises(OidcFailed) as failed:
        begin(provider, "https://panel/cb", addresses=WebhookAddressPolicy(), resolve=resolve)
    assert asked == ["idp.example.com"]
    assert failed.value.refused_field == "issuer"
    assert "10.0.0.5 is a private address" in failed.value.reason


def test_a_redirect_from_the_provider_is_not_followed(
    loopback_world: PanelWorld, provider: Provider
) -> None:
    """A redirect would be a way around the check: the answer is the redirect, a failure."""
    _stored_before(loopback_world, provider.url)
    provider.discovery_redirect = provider.url + "/elsewhere"
    with loopback_world.client() as anna:
        assert anna.get(f"/panel/oidc/start/{loopback_world.org_id}").status_code == 401
    assert provider.requests == ["/.well-known/openid-configuration"]
