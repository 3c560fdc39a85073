"""What an editor does with the people after inviting them: change a role (never the
organisation's last editor's), make a new invitation link (the old one dies), reset a password
(sessions and password end at once, TOTP kept), remove the organisation's own sign-in provider
(its sessions end); an operator removes a named operator. Each is on the trail, naming who."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing

import httpx
import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.oidc_provider import CLIENT_ID, CLIENT_SECRET, Provider, running_provider
from tests.panel.people_support import (
    current_code,
    first_step,
    give_code,
    invite,
    set_password,
    sign_in_person,
)

LAST_EDITOR = "last editor cannot be made a viewer or removed"


def _person_id(page: str, email: str) -> str:
    after = page.split(f">{email}</td>", 1)[1]
    found = re.search(r"/panel/people/([0-9a-f-]{36})/", after)
    assert found is not None, page
    return found.group(1)


def _post(client: httpx.Client, path: str, **data: str) -> httpx.Response:
    page = client.get("/panel/people")
    return client.post(path, data={"csrf": csrf_of(page.text), **data})


def _trail(world: PanelWorld, kind: str) -> list[dict[str, object]]:
    key = world.server.create_operator_key()
    with world.client(headers={"Authorization": f"Bearer {key}"}) as api:
        answer = api.get("/v1/admin/events", params={"kind": kind})
    assert answer.status_code == 200, answer.text
    events: list[dict[str, object]] = answer.json()["events"]
    return events


def _anna_signed_in(world: PanelWorld, editor: httpx.Client, role: str) -> tuple[httpx.Client, str]:
    link = invite(editor, "Anna de Vries", "anna@example.com", role)
    anna = world.client()
    assert set_password(anna, link).status_code == 303
    secret = sign_in_person(anna, "anna@example.com")
    return anna, secret


def test_an_editor_changes_a_role_and_the_person_has_it_at_once(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        anna, _ = _anna_signed_in(panel_world, editor, "viewer")
        with closing(anna):
            assert 'action="/panel/people"' not in anna.get("/panel/people").text
            anna_id = _person_id(editor.get("/panel/people").text, "anna@example.com")
            made = _post(editor, f"/panel/people/{anna_id}/role", role="editor")
            assert made.status_code == 303
            assert "The role is changed" in editor.get(made.headers["location"]).text
            assert 'action="/panel/people"' in anna.get("/panel/people").text
            refused = _post(editor, f"/panel/people/{anna_id}/role", role="operator")
            assert refused.status_code == 422
    [event] = _trail(panel_world, "person.role_changed")
    assert event["data"] == {
        "person_id": anna_id,
        "name": "Anna de Vries",
        "from": "viewer",
        "to": "editor",
    }
    assert event["actor"]["kind"] == "user"  # type: ignore[index]


def test_the_last_editor_can_be_neither_demoted_nor_removed(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        anna, _ = _anna_signed_in(panel_world, editor, "editor")
        with closing(anna):
            anna_id = _person_id(anna.get("/panel/people").text, "anna@example.com")
            for path, data in (
                (f"/panel/people/{anna_id}/role", {"role": "viewer"}),
                (f"/panel/people/{anna_id}/remove", {}),
            ):
                for who in (anna, editor):
                    answer = _post(who, path, **data)
                    assert answer.status_code == 409, answer.text
                    assert LAST_EDITOR in answer.text
            assert 'action="/panel/people"' in anna.get("/panel/people").text
            # With a second editor, the first may go.
            invite(editor, "Bob Jansen", "bob@example.com", "editor")
            assert _post(editor, f"/panel/people/{anna_id}/role", role="viewer").status_code == 303
            bob_id = _person_id(editor.get("/panel/people").text, "bob@example.com")
            answer = _post(editor, f"/panel/people/{bob_id}/remove")
            assert answer.status_code == 409 and LAST_EDITOR in answer.text


def test_a_new_invitation_link_kills_the_old_one(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        old = invite(editor, "Bob Jansen", "bob@example.com", "viewer")
        bob_id = _person_id(editor.get("/panel/people").text, "bob@example.com")
        answer = _post(editor, f"/panel/people/{bob_id}/invitation")
        assert answer.status_code == 200
        new = answer.text.split('id="invitation-link"><code>', 1)[1].split("<", 1)[0]
        assert new != old and "/panel/invitation/" in new
        with panel_world.client() as bob:
            assert bob.get(old).status_code == 410
            assert set_password(bob, new).status_code == 303
        # Through the link now: a new invitation is not what this person needs.
        again = _post(editor, f"/panel/people/{bob_id}/invitation")
        assert again.status_code == 409 and "reset the password" in again.text
    [event] = _trail(panel_world, "person.invitation_reissued")
    assert event["data"] == {"person_id": bob_id, "name": "Bob Jansen"}
    assert new.rsplit("/", 1)[1] not in str(event)


def test_a_password_reset_ends_the_sessions_and_keeps_the_authenticator(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        anna, secret = _anna_signed_in(panel_world, editor, "viewer")
        anna_id = _person_id(editor.get("/panel/people").text, "anna@example.com")
        answer = _post(editor, f"/panel/people/{anna_id}/reset")
        assert answer.status_code == 200
        assert "Their sessions have ended" in answer.text
        link = answer.text.split('id="invitation-link"><code>', 1)[1].split("<", 1)[0]
        assert "/panel/reset/" in link
    with closing(anna):
        assert anna.get("/panel/agents").status_code == 303  # signed out
        assert first_step(anna, "anna@example.com").status_code == 303  # old password dead
        reset = set_password(anna, link, "a new password of Anna")
        assert reset.headers["location"] == "/panel/sign-in?new_password=1"
        assert "Your new password is set" in anna.get(reset.headers["location"]).text
        assert anna.get(link).status_code == 410  # used once
        step = first_step(anna, "anna@example.com", "a new password of Anna")
        assert step.status_code == 200
        assert 'id="totp-secret"' not in step.text  # the same authenticator, no new set-up
        give_code(anna, step, current_code(secret))
    [event] = _trail(panel_world, "person.password_reset")
    assert event["data"] == {"person_id": anna_id, "name": "Anna de Vries"}


@pytest.fixture
def provider() -> Iterator[Provider]:
    with running_provider() as running:
        yield running


def test_removing_the_provider_ends_its_sign_ins(
    loopback_world: PanelWorld, provider: Provider
) -> None:
    with sign_in_client(loopback_world, loopback_world.panel_key) as editor:
        saved = _post(
            editor,
            "/panel/people/oidc",
            issuer=provider.url,
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
        )
        assert saved.status_code == 303
        invite(editor, "Anna de Vries", "anna@example.com", "viewer")
        with loopback_world.client() as anna:
            start = anna.get(f"/panel/oidc/start/{loopback_world.org_id}")
            back = anna.get(anna.get(start.headers["location"]).headers["location"])
            assert back.status_code == 200
            assert anna.get("/panel/agents").status_code == 200
            removed = _post(editor, "/panel/people/oidc", action="remove")
            assert removed.status_code == 303
            assert "nobody signs in through it" in editor.get(removed.headers["location"]).text
            assert anna.get("/panel/agents").status_code == 303
            assert anna.get(f"/panel/oidc/start/{loopback_world.org_id}").status_code == 401
            # Nothing left to remove.
            assert _post(editor, "/panel/people/oidc", action="remove").status_code == 404
    [event] = _trail(loopback_world, "oidc.removed")
    assert event["data"] == {"issuer": provider.url, "sessions_ended": 1}


def test_an_operator_removes_a_named_operator(panel_world: PanelWorld) -> None:
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as operator:
        form = operator.get("/panel/operator/people")
        answer = operator.post(
            "/panel/operator/people",
            data={"csrf": csrf_of(form.text), "name": "Piet Bakker", "email": "piet@example.com"},
        )
        link = answer.text.split('id="invitation-link"><code>', 1)[1].split("<", 1)[0]
        with panel_world.client() as piet:
            assert set_password(piet, link).status_code == 303
            sign_in_person(piet, "piet@example.com")
            assert piet.get("/panel/operator").status_code == 200
            page = operator.get("/panel/operator/people").text
            piet_id = re.search(r"/panel/operator/people/([0-9a-f-]{36})/remove", page)
            assert piet_id is not None
            removed = operator.post(
                f"/panel/operator/people/{piet_id.group(1)}/remove",
                data={"csrf": csrf_of(page)},
            )
            assert removed.status_code == 303
            assert piet.get("/panel/operator").status_code == 303
            assert "piet@example.com" not in operator.get("/panel/operator/people").text
    [event] = _trail(panel_world, "person.removed")
    assert event["data"] == {"person_id": piet_id.group(1), "name": "Piet Bakker"}
    assert event["actor"]["kind"] == "operator"  # type: ignore[index]
