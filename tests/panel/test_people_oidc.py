"""Signing in through the organisation's own OpenID Connect provider (a real one, on loopback):
the code flow with PKCE, the state and nonce checked, the ID token verified against the
provider's keys, and a person matched only when invited. The provider listens on 127.0.0.1, so
these worlds' operator allowed that network (`loopback_world`)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import psycopg
import pytest

from tests.panel.conftest import PanelWorld, sign_in_client
from tests.panel.oidc_provider import CLIENT_ID, CLIENT_SECRET, Provider, running_provider
from tests.panel.people_support import invite, save_oidc


@pytest.fixture
def provider() -> Iterator[Provider]:
    with running_provider() as running:
        yield running


def _set_up(world: PanelWorld, provider: Provider) -> None:
    with sign_in_client(world, world.panel_key) as editor:
        saved = save_oidc(editor, provider.url, CLIENT_ID)
        assert saved.headers["location"].endswith("oidc_saved=1")
        shown = editor.get("/panel/people").text
        assert CLIENT_SECRET not in shown
        assert f"/panel/oidc/start/{world.org_id}" in shown
        invite(editor, "Anna de Vries", "anna@example.com", "editor")


def _to_provider_and_back(client: httpx.Client, world: PanelWorld) -> httpx.Response:
    """Start at the organisation's sign-in address; the provider sends the browser back."""
    start = client.get(f"/panel/oidc/start/{world.org_id}")
    assert start.status_code == 303, start.text
    at_provider = client.get(start.headers["location"])
    assert at_provider.status_code == 302
    return client.get(at_provider.headers["location"])


def test_an_invited_person_signs_in_through_the_provider(
    loopback_world: PanelWorld, provider: Provider
) -> None:
    _set_up(loopback_world, provider)
    with loopback_world.client() as anna:
        back = _to_provider_and_back(anna, loopback_world)
        assert back.status_code == 200, back.text
        assert anna.get("/panel/agents").status_code == 200
    # The code was exchanged with the PKCE verifier (the provider checked it against the
    # challenge of the authorization request).
    assert provider.token_requests and provider.token_requests[0]["code_verifier"]


def test_a_returned_state_that_was_not_sent_is_refused(
    loopback_world: PanelWorld, provider: Provider
) -> None:
    _set_up(loopback_world, provider)
    with loopback_world.client() as anna:
        start = anna.get(f"/panel/oidc/start/{loopback_world.org_id}")
        at_provider = anna.get(start.headers["location"])
        back = at_provider.headers["location"].replace("state=", "state=forged")
        answer = anna.get(back)
        assert answer.status_code == 401
        assert anna.get("/panel/agents").status_code == 303


def test_an_id_token_with_another_nonce_is_refused(
    loopback_world: PanelWorld, provider: Provider
) -> None:
    _set_up(loopback_world, provider)
    provider.wrong_nonce = True
    with loopback_world.client() as anna:
        assert _to_provider_and_back(anna, loopback_world).status_code == 401
        assert anna.get("/panel/agents").status_code == 303


def test_an_id_token_signed_by_a_key_not_in_the_jwks_is_refused(
    loopback_world: PanelWorld, provider: Provider
) -> None:
    _set_up(loopback_world, provider)
    provider.foreign_key = True
    with loopback_world.client() as anna:
        assert _to_provider_and_back(anna, loopback_world).status_code == 401
        assert anna.get("/panel/agents").status_code == 303


def test_an_unverified_address_matches_nobody(
    loopback_world: PanelWorld, provider: Provider
) -> None:
    _set_up(loopback_world, provider)
    provider.email_verified = False
    with loopback_world.client() as anna:
        assert _to_provider_and_back(anna, loopback_world).status_code == 401


def test_a_person_not_invited_is_refused(loopback_world: PanelWorld, provider: Provider) -> None:
    _set_up(loopback_world, provider)
    provider.email = "mallory@example.com"
    provider.subject = "mallory"
    with loopback_world.client() as mallory:
        answer = _to_provider_and_back(mallory, loopback_world)
        assert answer.status_code == 401
        assert "did not work" in answer.text


@pytest.mark.parametrize(
    ("subject", "email"),
    [
        pytest.param("anna\x00", "anna@example.com", id="nul_in_the_subject"),
        pytest.param("anna", "anna\x00@example.com", id="nul_in_the_address"),
    ],
)
def test_claims_holding_a_nul_match_nobody_and_change_nothing(
    loopback_world: PanelWorld, provider: Provider, subject: str, email: str
) -> None:
    """The provider is the organisation's own, but what its token says is input all the same:
    a NUL, which no subject or address on record can hold, is a sign-in refused like any
    unknown person's, never a server error; no subject is remembered."""
    _set_up(loopback_world, provider)
    provider.subject, provider.email = subject, email
    with loopback_world.client() as stranger:
        answer = _to_provider_and_back(stranger, loopback_world)
        assert answer.status_code == 401, answer.text
        assert stranger.get("/panel/agents").status_code == 303
    with psycopg.connect(loopback_world.server.database_url) as conn:
        subjects = conn.execute("SELECT oidc_subject FROM people").fetchall()
    assert subjects == [(None,)]


@pytest.mark.parametrize(
    "client_id",
    [
        pytest.param("nachtwacht\x1b[2J", id="terminal_escape"),
        pytest.param("nachtwacht\x9b", id="c1_control"),
    ],
)
def test_a_client_id_with_a_control_character_is_refused_and_nothing_is_saved(
    loopback_world: PanelWorld, provider: Provider, client_id: str
) -> None:
    """The client id is typed by an editor and shown on the people page and the trail."""
    with sign_in_client(loopback_world, loopback_world.panel_key) as editor:
        saved = save_oidc(editor, provider.url, client_id)
    assert saved.headers["location"].endswith("oidc_error=client")
    with psycopg.connect(loopback_world.server.database_url) as conn:
        stored = conn.execute("SELECT count(*) FROM oidc_providers").fetchone()
        configured = conn.execute(
            "SELECT count(*) FROM events WHERE kind = 'oidc.configured'"
        ).fetchone()
    assert (stored, configured) == ((0,), (0,))
