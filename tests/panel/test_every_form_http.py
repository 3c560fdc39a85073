"""An attacker's pass over every form of the panel, found from the panel's own routes so that a
form added later is covered too: without its CSRF token, or with a forged one, no form changes
anything, whoever is signed in; and a customer of one organisation reaches nothing of another's
agents through any address that names one — the answer is the one an id that exists nowhere
gets, so nobody learns which ids exist."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from control_plane.panel import ROUTERS
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.every_form import address, panel_state, post_routes

# The forms anyone may send before signing in: a wrong token is refused by their own rule.
OPEN_FORMS = {"/panel/sign-in", "/panel/sign-in/person", "/panel/sign-in/code"}


def _fields() -> dict[str, object]:
    # What the forms send, all at once: each route reads its own.
    return {
        "enabled": "1",
        "times": "04:00",
        "until": "2027-04-02",
        "reason": "attacker",
        "url": "https://hooks.example/",
        "name": "x",
        "label": "x",
        "uses": "1",
        "hours": "1",
        "engaged": "1",
        "action": "hold",
        "target": "view",
        "count": "1",
        "email": "eve@example.com",
        "role": "editor",
        "key": "nwp_forged",
        "password": "x",
        "code": "000000",
    }


@pytest.mark.parametrize("who", ["customer", "operator"])
def test_no_form_changes_anything_without_its_token(panel_world: PanelWorld, who: str) -> None:
    key = panel_world.panel_key if who == "customer" else panel_world.server.create_operator_key()
    ids = {"agent_id": panel_world.agent_id, "org_id": panel_world.org_id}
    with sign_in_client(panel_world, key) as client:
        before = panel_state(panel_world)
        for pattern in post_routes():
            url = address(pattern, ids)
            for token in (None, "forged", ""):
                data = _fields() | ({} if token is None else {"csrf": token})
                answer = client.post(url, data=data)
                assert answer.status_code in {303, 400, 401, 403, 404, 409, 410, 422}, (url, answer)
                if answer.status_code == 303:
                    # Only to sign in again (the open forms' own refusal), never a success.
                    assert answer.headers["location"].startswith("/panel/sign-in"), url
                if answer.status_code != 303:
                    content = answer.headers["content-type"]
                    assert content.startswith("text/html"), (url, answer.text[:200])
                assert panel_state(panel_world) == before, (url, token)
        assert client.get("/panel/").status_code in {200, 303}  # still signed in


def _without_tokens(html: str) -> str:
    return re.sub(r'name="csrf" value="[^"]*"', "", html)


def _as_seen(html: str, *ids: str) -> str:
    for agent_id in ids:
        html = html.replace(agent_id, "ID")
    return _without_tokens(html)


def test_another_organisations_agent_is_every_where_not_found(panel_world: PanelWorld) -> None:
    """Every address naming an agent, read and posted with a valid token by the other
    organisation's editor: the same answer as for an id that exists nowhere."""
    other = panel_world.server.create_org("Globex")
    theirs = panel_world.agent_id  # Acme's agent; Globex's editor tries it
    nowhere = str(uuid.uuid4())
    patterns = sorted(
        {
            (method, route.path)
            for router in ROUTERS
            for route in router.routes
            if "{agent_id}" in route.path and "/operator/" not in route.path
            for method in (getattr(route, "methods", None) or ())
            if method in {"GET", "POST"}
        }
    )
    assert len(patterns) >= 6
    with sign_in_client(panel_world, other["panel_key"]) as client:
        token = csrf_of(client.get("/panel/agents").text)
        before = panel_state(panel_world)
        for method, pattern in patterns:
            answers: list[httpx.Response] = []
            for agent_id in (theirs, nowhere):
                url = address(pattern, {"agent_id": agent_id, "run_id": nowhere})
                if method == "GET":
                    answers.append(client.get(url))
                else:
                    answers.append(client.post(url, data=_fields() | {"csrf": token}))
            seen, unseen = answers
            assert seen.status_code == unseen.status_code, (method, pattern)
            if not pattern.endswith("/preview"):  # the preview shows only the times it is given
                assert seen.status_code == 404, (method, pattern, seen.status_code)
            assert _as_seen(seen.text, theirs, nowhere) == _as_seen(unseen.text, theirs, nowhere)
            assert "web-01" not in seen.text
        for query in (f"agent={theirs}",):
            for page in ("/panel/history/runs", "/panel/history/events"):
                seen = client.get(f"{page}?{query}")
                unseen = client.get(f"{page}?agent={nowhere}")
                assert seen.status_code == unseen.status_code
                assert "web-01" not in seen.text
        bulk = client.post(
            "/panel/agents/bulk",
            data={"csrf": token, "action": "hold", "target": "selected", "agent": theirs}
            | {"until": "2027-04-02", "reason": "x"},
        )
        assert bulk.status_code == 404
        assert panel_state(panel_world) == before


def test_an_operators_agent_page_under_another_organisation_is_not_found(
    panel_world: PanelWorld,
) -> None:
    other = panel_world.server.create_org("Globex")
    key = panel_world.server.create_operator_key()
    wrong = f"/panel/operator/orgs/{other['org_id']}/agents/{panel_world.agent_id}"
    nowhere = f"/panel/operator/orgs/{other['org_id']}/agents/{uuid.uuid4()}"
    with sign_in_client(panel_world, key) as operator:
        token = csrf_of(operator.get("/panel/operator").text)
        before = panel_state(panel_world)
        seen = operator.get(wrong)
        unseen = operator.get(nowhere)
        forced = operator.post(wrong, data={"csrf": token, "action": "force", "reason": "x"})
    assert seen.status_code == unseen.status_code == forced.status_code == 404
    assert "web-01" not in seen.text and "web-01" not in forced.text
    assert panel_state(panel_world) == before
