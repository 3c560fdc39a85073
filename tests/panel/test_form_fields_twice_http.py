"""A form's body that gives one field twice with two values is refused at that field, as the
query string is: whichever value the route took would be a guess. Every POST form of the panel,
found from its own routes, each field it may be sent doubled: the 422 page names the field and
quotes both values (never a secret's), and nothing changed."""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import urlencode

import psycopg
import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.every_form import address, panel_state, post_routes
from tests.panel.history_world import add_agent

# Fields whose values are never shown back.
SECRETS = {"key", "password", "repeated", "secret", "client_secret"}


def _post(client: Any, url: str, pairs: list[tuple[str, str]]) -> Any:
    """`pairs` sent as a browser sends a form, in their order (a name may come twice)."""
    form = {"content-type": "application/x-www-form-urlencoded"}
    return client.post(url, content=urlencode(pairs), headers=form)


FIELDS = {
    "enabled": "1",
    "until": "2027-04-02",
    "reason": "first reason",
    "url": "https://hooks.example/",
    "secret": "first-secret-value",
    "name": "first-name",
    "label": "first-label",
    "uses": "1",
    "hours": "1",
    "engaged": "1",
    "action": "hold",
    "target": "selected",
    "count": "1",
    "email": "eve@example.com",
    "role": "editor",
    "key": "nwp_first_key",
    "password": "first-password",
    "repeated": "first-password",
    "code": "000000",
    "version": "1.0.0",
    "timezone": "Europe/Berlin",
    "catch_up_minutes": "30",
    "once": "first-once",
}


@pytest.mark.parametrize("who", ["customer", "operator"])
def test_every_form_refuses_a_field_given_twice(panel_world: PanelWorld, who: str) -> None:
    key = panel_world.panel_key if who == "customer" else panel_world.server.create_operator_key()
    ids = {"agent_id": panel_world.agent_id, "org_id": panel_world.org_id}
    with sign_in_client(panel_world, key) as client:
        token = csrf_of(
            client.get("/panel/operator" if who == "operator" else "/panel/agents").text
        )
        before = panel_state(panel_world)
        for pattern in post_routes():
            url = address(pattern, ids)
            for name in [*FIELDS, "csrf"]:
                sent = FIELDS | {"csrf": token}
                other = "other-" + sent[name]
                data = [*sent.items(), (name, other)]
                answer = _post(client, url, data)
                assert answer.status_code == 422, (url, name, answer.status_code)
                assert answer.headers["content-type"].startswith("text/html")
                text = html.unescape(answer.text)
                assert "two values for one field" in text, (url, name)
                if name in SECRETS:
                    assert sent[name] not in text and other not in text, (url, name)
                elif name != "csrf":  # the page's own token is in it anyway
                    assert f"“{sent[name]}” and “{other}”" in text, (url, name)
                assert panel_state(panel_world) == before, (url, name)
        assert client.get("/panel/").status_code in {200, 303}  # still signed in


def test_the_same_value_twice_is_one_value(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/agents").text)
        answer = _post(
            client,
            "/panel/agents/bulk",
            [
                ("csrf", token),
                ("csrf", token),
                ("action", "hold"),
                ("action", "hold"),
                ("target", "selected"),
                ("agent", panel_world.agent_id),
                ("until", "2027-04-02"),
                ("reason", "maintenance"),
            ],
        )
        assert answer.status_code == 303, answer.text[:300]
    with psycopg.connect(panel_world.server.database_url) as conn:
        row = conn.execute("SELECT count(*) FROM holds").fetchone()
    assert row is not None and row[0] == 1


@pytest.mark.parametrize(
    ("field", "first", "last"),
    [
        ("action", "hold", "update"),
        ("target", "selected", "view"),
        ("until", "2027-04-02", "2099-01-01"),
        ("reason", "maintenance", "other"),
    ],
)
def test_a_bulk_form_with_a_field_twice_changes_nothing(
    panel_world: PanelWorld, field: str, first: str, last: str
) -> None:
    """Before, the last value decided: `action=hold&action=update` updated every agent now."""
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/agents").text)
        before = panel_state(panel_world)
        sent = {
            "csrf": token,
            "action": "hold",
            "target": "selected",
            "until": "2027-04-02",
            "reason": "maintenance",
            "count": "1",
        }
        data = [*sent.items(), ("agent", panel_world.agent_id)]
        data.insert(list(sent).index(field) + 1, (field, last))
        data[list(sent).index(field)] = (field, first)
        answer = _post(client, "/panel/agents/bulk", data)
        assert answer.status_code == 422, answer.text[:300]
        assert f"“{first}” and “{last}”: two values for one field" in html.unescape(answer.text)
        assert panel_state(panel_world) == before


@pytest.mark.parametrize("url", ["/panel/default-schedule", "/panel/agents/schedules"])
def test_a_schedule_form_that_takes_one_times_field_refuses_two(
    panel_world: PanelWorld, url: str
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/agents").text)
        before = panel_state(panel_world)
        answer = _post(
            client,
            url,
            [
                ("csrf", token),
                ("enabled", "1"),
                ("times", "04:00"),
                ("times", "05:00"),
                ("target", "selected"),
                ("agent", panel_world.agent_id),
                ("count", "1"),
            ],
        )
        assert answer.status_code == 422, (url, answer.status_code)
        assert "“04:00” and “05:00”: two values" in html.unescape(answer.text)
        assert panel_state(panel_world) == before


def test_many_agents_and_many_times_are_still_many(panel_world: PanelWorld) -> None:
    """The fields a form sends one of per row (the agents ticked, the schedule's times) are
    lists: many values are what they are for."""
    second = add_agent(panel_world, "web-02")
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/agents").text)
        answer = _post(
            client,
            "/panel/agents/bulk",
            [
                ("csrf", token),
                ("action", "hold"),
                ("target", "selected"),
                ("agent", panel_world.agent_id),
                ("agent", second),
                ("until", "2027-04-02"),
                ("reason", "maintenance"),
                ("count", "2"),
            ],
        )
        assert answer.status_code == 303, html.unescape(answer.text)[:500]
        edited = _post(
            client,
            f"/panel/agents/{panel_world.agent_id}/schedule",
            [("csrf", token), ("enabled", "1"), ("times", "04:00"), ("times", "05:00")],
        )
        assert edited.status_code == 303, html.unescape(edited.text)[:500]
    with psycopg.connect(panel_world.server.database_url) as conn:
        holds = conn.execute("SELECT count(*) FROM holds").fetchone()
    assert holds is not None and holds[0] == 2


@pytest.mark.parametrize(
    "address",
    [
        "/panel/default-schedule?saved=1&saved=0",
        "/panel/enrollment?revoked=0&revoked=1",
        "/panel/agents/{agent}?requested=1&requested=0",
        "/panel/history/versions?nights=7&nights=30",
    ],
)
def test_an_address_that_gives_a_parameter_twice_is_refused_at_it(
    panel_world: PanelWorld, address: str
) -> None:
    """The parameters a page's route declares, as its form's fields: two values are a guess."""
    url = address.format(agent=panel_world.agent_id)
    name = url.split("?")[1].split("=")[0]
    first, other = (pair.split("=")[1] for pair in url.split("?")[1].split("&"))
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        before = panel_state(panel_world)
        answer = client.get(url)
        assert answer.status_code == 422, (url, answer.status_code)
        said = f"{name}: “{first}” and “{other}”: two values for one field"
        assert said in html.unescape(answer.text), url
        assert f"query: “{first}”" not in html.unescape(answer.text)
        assert panel_state(panel_world) == before
