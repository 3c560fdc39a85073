"""An organisation's schedule for new agents, over HTTP against a real control plane: set in
the panel (CSRF, the editor's rules at the field, in the reader's language) and through the
panel's API; taken by an agent enrolling with a token or from the command line; and no agent
already enrolled changes. The database holds it to the agents' rule too."""

from __future__ import annotations

import re
from uuid import UUID

import httpx
import psycopg
import pytest

from ground.contract import API_PREFIX, ENROLL_PATH
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

FORM = {"uses": "1", "hours": "24", "name_pattern": "", "label": ""}


def schedule_of(world: PanelWorld, name: str) -> tuple[bool, list[str]]:
    with psycopg.connect(world.server.database_url) as conn:
        row = conn.execute(
            "SELECT update_schedule_enabled, update_schedule_times FROM agents"
            " WHERE name = %s AND org_id = %s",
            [name, UUID(world.org_id)],
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def _save(client: httpx.Client, data: dict[str, str]) -> httpx.Response:
    page = client.get("/panel/default-schedule")
    return client.post("/panel/default-schedule", data={"csrf": csrf_of(page.text), **data})


def _enroll_with_a_token(world: PanelWorld, client: httpx.Client, name: str) -> None:
    page = client.get("/panel/enrollment")
    made = client.post("/panel/enrollment", data={**FORM, "csrf": csrf_of(page.text)})
    found = re.search(r"--enrollment-token (nwe_[A-Za-z0-9_-]+)", made.text)
    assert found is not None
    with httpx.Client(base_url=world.server.base_url, timeout=30) as host:
        enrolled = host.post(
            ENROLL_PATH, json={"name": name}, headers={"Authorization": f"Bearer {found[1]}"}
        )
    assert enrolled.status_code == 201, enrolled.text


def test_new_agents_take_it_and_enrolled_agents_keep_theirs(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        first = client.get("/panel/default-schedule")
        saved = _save(client, {"enabled": "1", "times": "23:30, 01:15"})
        _enroll_with_a_token(panel_world, client, "web-02")
        shown = client.get("/panel/default-schedule?saved=1")
    panel_world.server.enroll_agent(panel_world.org_id, "web-03")
    assert "Not chosen yet: new agents take the platform" in first.text, first.text[-1500:]
    assert "does not change the agents already enrolled" in first.text
    assert saved.status_code == 303
    assert 'value="01:15, 23:30"' in shown.text
    assert schedule_of(panel_world, "web-01") == (True, ["03:00"])
    assert schedule_of(panel_world, "web-02") == (True, ["01:15", "23:30"])
    assert schedule_of(panel_world, "web-03") == (True, ["01:15", "23:30"])
    with psycopg.connect(panel_world.server.database_url) as conn:
        changes = conn.execute(
            "SELECT e.actor_kind, c.name, e.data FROM events e JOIN credentials c"
            " ON c.id = e.actor_id WHERE e.kind = 'default_schedule.changed'"
        ).fetchall()
    assert changes == [
        (
            "user",
            "first panel key",
            {"before": None, "after": {"enabled": True, "times": ["01:15", "23:30"]}},
        )
    ]


def test_off_for_new_agents(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        assert _save(client, {"times": ""}).status_code == 303
    panel_world.server.enroll_agent(panel_world.org_id, "quiet")
    assert schedule_of(panel_world, "quiet") == (False, [])


@pytest.mark.parametrize(
    ("lang", "times", "message"),
    [
        (
            "en",
            "02:00, 03:07",
            "03:07 is not on the five-minute grid (for example 03:05 or 03:10).",
        ),
        ("de", "02:00, 03:07", "03:07 liegt nicht im Fünf-Minuten-Raster"),
    ],
)
def test_a_bad_time_is_refused_at_its_field(
    panel_world: PanelWorld, lang: str, times: str, message: str
) -> None:
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": lang}
    ) as client:
        answer = _save(client, {"enabled": "1", "times": times})
    assert answer.status_code == 422
    assert '<p class="field-error" id="default-times-error">' + message in answer.text
    panel_world.server.enroll_agent(panel_world.org_id, "web-02")
    assert schedule_of(panel_world, "web-02") == (True, ["03:00"])


def test_the_form_needs_its_csrf_token(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        forged = client.post(
            "/panel/default-schedule", data={"csrf": "forged", "enabled": "1", "times": "01:00"}
        )
    assert forged.status_code == 403
    panel_world.server.enroll_agent(panel_world.org_id, "web-02")
    assert schedule_of(panel_world, "web-02") == (True, ["03:00"])


def test_the_panels_api_reads_and_sets_it(panel_world: PanelWorld) -> None:
    auth = {"Authorization": f"Bearer {panel_world.panel_key}"}
    with panel_world.client(headers=auth) as api:
        before = api.get(f"{API_PREFIX}/default-schedule")
        bad = api.put(f"{API_PREFIX}/default-schedule", json={"enabled": True, "times": ["03:07"]})
        put = api.put(f"{API_PREFIX}/default-schedule", json={"enabled": True, "times": ["04:00"]})
    assert before.json() == {"org_id": panel_world.org_id, "schedule": None}
    assert bad.status_code == 422
    assert "03:07" in bad.text
    assert put.json() == {
        "org_id": panel_world.org_id,
        "schedule": {"enabled": True, "times": ["04:00"]},
    }
    panel_world.server.enroll_agent(panel_world.org_id, "web-02")
    assert schedule_of(panel_world, "web-02") == (True, ["04:00"])


@pytest.mark.parametrize(
    ("enabled", "times"),
    [
        pytest.param(True, '["03:07"]', id="off_the_grid"),
        pytest.param(True, "[]", id="on_without_times"),
        pytest.param(True, '["03:00", "03:00"]', id="twice"),
        pytest.param(True, None, id="half_set"),
        pytest.param(True, '"03:00"', id="not_a_list"),
    ],
)
def test_the_database_holds_it_to_the_agents_rule(
    panel_world: PanelWorld, enabled: bool, times: str | None
) -> None:
    with (
        psycopg.connect(panel_world.server.database_url) as conn,
        pytest.raises(psycopg.errors.CheckViolation),
    ):
        conn.execute(
            "UPDATE orgs SET default_schedule_enabled = %s, default_schedule_times = %s::jsonb"
            " WHERE id = %s",
            [enabled, times, UUID(panel_world.org_id)],
        )
