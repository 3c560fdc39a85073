"""The sign-in lock over HTTP tells nobody which addresses have an account: an address nobody
was invited with is answered, failure after failure and lock included, exactly as a person's."""

from __future__ import annotations

import re

import httpx

from control_plane.accounts.people import LOCK_AFTER
from tests.panel.conftest import PanelWorld, sign_in_client
from tests.panel.people_support import first_step, invite, set_password

_TOKEN = re.compile(r'(name="(?:csrf|signin_token)" value=")[^"]*(")')


def _answers(client: httpx.Client, email: str, tries: int) -> list[tuple[object, ...]]:
    """Each try's answer as a stranger sees it: its status, where it leads, and the page there
    (the form's fresh token left out)."""
    seen: list[tuple[object, ...]] = []
    for _ in range(tries):
        answer = first_step(client, email, "not the password at all")
        location = answer.headers.get("location", "")
        shown = client.get(location) if location else answer
        seen.append(
            (
                answer.status_code,
                location,
                answer.text,
                shown.status_code,
                _TOKEN.sub(r"\1…\2", shown.text),
            )
        )
    return seen


def test_an_unknown_address_locks_like_a_persons_with_the_same_answers(
    panel_world: PanelWorld,
) -> None:
    """Six wrong passwords for a person's address and six for an address nobody has: before,
    the person's sixth answer said "locked" and the stranger's "wrong", so six tries told anyone
    whether an address had an account."""
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "editor")
    with panel_world.client() as anna:
        set_password(anna, link)
    with panel_world.client() as stranger:
        known = _answers(stranger, "anna@example.com", LOCK_AFTER + 1)
    with panel_world.client() as stranger:
        unknown = _answers(stranger, "nobody@example.com", LOCK_AFTER + 1)
    assert unknown == known
    locations = [answer[1] for answer in known]
    assert locations == ["/panel/sign-in?refused=wrong"] * LOCK_AFTER + [
        "/panel/sign-in?refused=locked"
    ]
    assert "locked for 15 minutes" in known[-1][4]  # type: ignore[operator]


def test_an_unknown_address_stays_locked_whatever_password_is_tried(
    panel_world: PanelWorld,
) -> None:
    with panel_world.client() as stranger:
        _answers(stranger, "nobody@example.com", LOCK_AFTER)
        again = first_step(stranger, "nobody@example.com", "yet another guess, the sixth")
        other_case = first_step(stranger, "NOBODY@Example.com ", "and a seventh")
    assert again.headers["location"] == "/panel/sign-in?refused=locked"
    assert other_case.headers["location"] == "/panel/sign-in?refused=locked"


def test_a_locked_person_and_a_locked_stranger_read_the_same_with_the_right_password(
    panel_world: PanelWorld,
) -> None:
    """The person's own password, while the lock holds, is refused as any other would be."""
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "editor")
    with panel_world.client() as anna:
        set_password(anna, link)
        _answers(anna, "anna@example.com", LOCK_AFTER)
        locked = first_step(anna, "anna@example.com")
    assert locked.headers["location"] == "/panel/sign-in?refused=locked"
