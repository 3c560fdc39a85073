"""Named people over HTTP: an invitation's link works once, a person signs in with a password and
a TOTP code (never the same code twice), is locked out after repeated failures, and the trail
names them for what they change."""

from __future__ import annotations

import re
import time

import psycopg
import pytest

from control_plane.accounts.passwords import TOTP_STEP_SECONDS, totp_code
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.people_support import (
    PASSWORD,
    current_code,
    first_step,
    give_code,
    invite,
    set_password,
    sign_in_person,
    totp_secret_of,
)


def test_an_invitation_link_works_once(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "editor")
    with panel_world.client() as anna:
        assert set_password(anna, link).status_code == 303
        again = anna.get(link)
        assert again.status_code == 410
        assert "used already" in again.text
        # A post with a form fetched before the first use is refused too.
        posted = anna.post(link, data={"csrf": "x", "password": PASSWORD, "repeated": PASSWORD})
        assert posted.status_code == 410


def test_an_unknown_invitation_link_is_refused(panel_world: PanelWorld) -> None:
    with panel_world.client() as stranger:
        answer = stranger.get("/panel/invitation/not-a-token")
    assert answer.status_code == 410
    assert "not one we know" in answer.text


def test_a_short_password_is_refused_and_the_link_stays_usable(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "editor")
    with panel_world.client() as anna:
        assert set_password(anna, link, "short").status_code == 422
        assert set_password(anna, link).status_code == 303


def test_a_person_signs_in_with_password_and_code_and_the_trail_names_them(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "editor")
    with panel_world.client() as anna:
        set_password(anna, link)
        step = first_step(anna, "anna@example.com")
        assert "otpauth://totp/nachtwacht:anna@example.com?secret=" in step.text
        secret = totp_secret_of(step.text)
        assert give_code(anna, step, current_code(secret)).status_code == 303
        agent = f"/panel/agents/{panel_world.agent_id}"
        form = anna.get(agent)
        saved = anna.post(
            agent + "/schedule",
            data={"csrf": csrf_of(form.text), "enabled": "on", "times": ["04:00"]},
        )
        assert saved.status_code in {200, 303}, saved.text
        form = anna.get(agent)
        asked = anna.post(agent + "/update", data={"csrf": csrf_of(form.text)})
        assert asked.status_code == 303, asked.text
        tokens = anna.get("/panel/enrollment")
        made = anna.post(
            "/panel/enrollment",
            data={"csrf": csrf_of(tokens.text), "uses": "2", "hours": "4", "label": "web"},
        )
        assert made.status_code == 200, made.text
        page = anna.get(agent)
    assert "Anna de Vries changed the update schedule." in page.text
    assert "Anna de Vries asked for an update now." in page.text


def test_a_wrong_code_is_refused(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "editor")
    with panel_world.client() as anna:
        set_password(anna, link)
        step = first_step(anna, "anna@example.com")
        secret = totp_secret_of(step.text)
        wrong = totp_code(secret, int(time.time()) // TOTP_STEP_SECONDS + 5)
        answer = give_code(anna, step, wrong)
        assert answer.status_code == 401
        assert "not right" in answer.text
        assert anna.get("/panel/agents").headers["location"].startswith("/panel/sign-in")


def test_a_code_is_not_accepted_twice(panel_world: PanelWorld) -> None:
    """A code seen over a shoulder (or replayed) within its thirty seconds signs nobody in."""
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "editor")
    with panel_world.client() as anna:
        set_password(anna, link)
        step = first_step(anna, "anna@example.com")
        secret = totp_secret_of(step.text)
        code = current_code(secret)
        if time.time() % TOTP_STEP_SECONDS > TOTP_STEP_SECONDS - 5:
            time.sleep(6)  # so both tries fall within the drift of the same step
            code = current_code(secret)
        assert give_code(anna, step, code).status_code == 303
    with panel_world.client() as thief:
        step = first_step(thief, "anna@example.com")
        replay = give_code(thief, step, code)
        assert replay.status_code == 401
        assert "used already" in replay.text
        assert thief.get("/panel/agents").headers["location"].startswith("/panel/sign-in")


def test_repeated_failures_lock_the_person_out(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "editor")
    with panel_world.client() as anna:
        set_password(anna, link)
        for _ in range(5):
            wrong = first_step(anna, "anna@example.com", "not the password at all")
            assert wrong.status_code == 303
            assert "refused=wrong" in wrong.headers["location"]
        # Even the right password is refused while the lock holds.
        locked = first_step(anna, "anna@example.com")
        assert "refused=locked" in locked.headers["location"]
        assert "locked for 15 minutes" in anna.get(locked.headers["location"]).text


def test_an_unknown_address_reads_like_a_wrong_password(panel_world: PanelWorld) -> None:
    with panel_world.client() as stranger:
        answer = first_step(stranger, "nobody@example.com")
    assert "refused=wrong" in answer.headers["location"]


@pytest.mark.parametrize(
    "email",
    [
        pytest.param("anna\x00@example.com", id="nul_after_the_name"),
        pytest.param("\x00", id="only_a_nul"),
    ],
)
def test_an_address_with_a_nul_reads_like_a_wrong_password_and_changes_nothing(
    panel_world: PanelWorld, email: str
) -> None:
    """No address holds a NUL (the invitation refuses one), and the database could not compare
    one: the form is answered as for an unknown address, never with a server error."""
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "editor")
    with panel_world.client() as anna:
        set_password(anna, link)
    before = _people(panel_world)
    with panel_world.client() as stranger:
        answer = first_step(stranger, email)
    assert answer.status_code == 303, answer.text
    assert "refused=wrong" in answer.headers["location"]
    assert _people(panel_world) == before


def _people(world: PanelWorld) -> list[tuple[object, ...]]:
    """The people and their sign-in state (password, code, sessions): what a sign-in changes.
    (A failure is counted against the address typed, `sign_in_failures`, a person's or not.)"""
    with psycopg.connect(world.server.database_url) as conn:
        return conn.execute(
            "SELECT p.email, p.password_hash, p.totp_secret, p.totp_last_step,"
            " count(s.person_id) FROM people p"
            " LEFT JOIN person_sessions s ON s.person_id = p.id"
            " GROUP BY p.id ORDER BY p.email"
        ).fetchall()


def test_a_person_signs_out(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "viewer")
    with panel_world.client() as anna:
        set_password(anna, link)
        sign_in_person(anna, "anna@example.com")
        page = anna.get("/panel/agents")
        assert page.status_code == 200
        anna.post("/panel/sign-out", data={"csrf": csrf_of(page.text)})
        assert anna.get("/panel/agents").headers["location"].startswith("/panel/sign-in")


def test_a_removed_person_is_signed_out_at_once_and_signs_in_no_more(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        # A viewer: the organisation's last editor could not be removed.
        link = invite(editor, "Anna de Vries", "anna@example.com", "viewer")
        with panel_world.client() as anna:
            set_password(anna, link)
            sign_in_person(anna, "anna@example.com")
            assert anna.get("/panel/agents").status_code == 200
            page = editor.get("/panel/people")
            person_id = _removal_id(page.text)
            removed = editor.post(
                f"/panel/people/{person_id}/remove", data={"csrf": csrf_of(page.text)}
            )
            assert removed.headers["location"] == "/panel/people?removed=1"
            assert anna.get("/panel/agents").status_code == 303
            again = first_step(anna, "anna@example.com")
            assert "refused=wrong" in again.headers["location"]


def test_another_organisations_person_is_not_found(panel_world: PanelWorld) -> None:
    other = panel_world.server.create_org("Other")
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        invite(editor, "Anna de Vries", "anna@example.com", "editor")
        page = editor.get("/panel/people")
        person_id = _removal_id(page.text)
    with sign_in_client(panel_world, other["panel_key"]) as stranger:
        form = stranger.get("/panel/people")
        answer = stranger.post(
            f"/panel/people/{person_id}/remove", data={"csrf": csrf_of(form.text)}
        )
        assert answer.status_code == 404
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        assert "anna@example.com" in editor.get("/panel/people").text


def _removal_id(html: str) -> str:
    """The id in the first person's removal form (each row has several forms)."""
    found = re.search(r'action="/panel/people/([0-9a-f-]{36})/remove"', html)
    assert found is not None, html
    return found.group(1)
