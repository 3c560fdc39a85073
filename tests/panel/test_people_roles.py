"""A viewer sees and changes nothing: every form post of the panel, enumerated from the app, is
refused for a viewer — so a new route that forgets the check fails here."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from control_plane.panel import mount_panel
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.people_support import invite, set_password, sign_in_person

# The posts a person makes before they are anyone: signing in and out, an invitation's password.
BEFORE_SIGN_IN = {
    "/panel/sign-in",
    "/panel/sign-out",
    "/panel/sign-in/person",
    "/panel/sign-in/code",
    "/panel/invitation/{token}",
    "/panel/reset/{token}",
}


def _api_routes(routes: list[Any]) -> list[APIRoute]:
    """The app's routes, through the routers it includes (the panel mounts its routers whole)."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        included = getattr(route, "original_router", None)
        if included is not None:
            found.extend(_api_routes(included.routes))
    return found


def changing_routes() -> list[str]:
    app = FastAPI()
    mount_panel(app)
    return sorted(
        route.path
        for route in _api_routes(app.routes)
        if route.methods & {"POST", "PUT", "PATCH", "DELETE"} and route.path not in BEFORE_SIGN_IN
    )


def test_the_enumeration_finds_the_customers_forms() -> None:
    found = changing_routes()
    assert "/panel/agents/{agent_id}/schedule" in found
    assert "/panel/people" in found
    assert len(found) > 15


def test_a_viewer_is_refused_every_changing_route(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Bob Jansen", "bob@example.com", "viewer")
    with panel_world.client() as bob:
        set_password(bob, link)
        sign_in_person(bob, "bob@example.com")
        csrf = csrf_of(bob.get("/panel/agents").text)
        before = bob.get(f"/panel/agents/{panel_world.agent_id}").text
        answers = {}
        for path in changing_routes():
            filled = path.replace("{agent_id}", panel_world.agent_id)
            filled = filled.replace("{org_id}", panel_world.org_id)
            while "{" in filled:
                start, end = filled.index("{"), filled.index("}")
                filled = filled[:start] + str(uuid.uuid4()) + filled[end + 1 :]
            answer = bob.post(
                filled,
                data={
                    "csrf": csrf,
                    "enabled": "on",
                    "times": ["05:00"],
                    "name": "Eve",
                    "email": "eve@example.com",
                    "role": "editor",
                    "url": "https://x.example",
                },
            )
            answers[path] = answer.status_code
            if not path.startswith("/panel/operator"):
                assert "Only editors can change this" in answer.text, path
        after = bob.get(f"/panel/agents/{panel_world.agent_id}").text
    allowed = {
        path: status
        for path, status in answers.items()
        if status != (404 if path.startswith("/panel/operator") else 403)
    }
    assert allowed == {}
    assert "05:00" not in after and before.count("04:00") == after.count("04:00")


def test_a_viewer_is_told_so_on_every_page_before_pressing_a_form(panel_world: PanelWorld) -> None:
    """The agent page shows a viewer the schedule, hold and "Update now" forms (the schedule
    editor also previews): a note at the top says a viewer cannot change anything, so a viewer
    who types a schedule learns it before the refusal, not from it. An editor sees no note."""
    note = "You are signed in as a viewer: you can see everything of your organisation"
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Bob Jansen", "bob@example.com", "viewer")
        assert note not in editor.get(f"/panel/agents/{panel_world.agent_id}").text
    with panel_world.client() as bob:
        set_password(bob, link)
        sign_in_person(bob, "bob@example.com")
        for path in (f"/panel/agents/{panel_world.agent_id}", "/panel/agents", "/panel/webhook"):
            assert note in bob.get(path).text, path


@pytest.mark.parametrize("role", ["editor"])
def test_an_editor_may_change(panel_world: PanelWorld, role: str) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", role)
    with panel_world.client() as anna:
        set_password(anna, link)
        sign_in_person(anna, "anna@example.com")
        page = anna.get("/panel/people")
        assert "<title>People · nachtwacht</title>" in page.text
        assert 'action="/panel/people"' in page.text
        invited = anna.post(
            "/panel/people",
            data={
                "csrf": csrf_of(page.text),
                "name": "Bob",
                "email": "b@example.com",
                "role": "viewer",
            },
        )
        assert invited.status_code == 200
        assert 'id="invitation-link"' in invited.text
