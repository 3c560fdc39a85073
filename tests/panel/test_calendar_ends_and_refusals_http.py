"""Values at the calendar's ends and refusals from deep in a service, sent through the panel's
forms: each is answered on the form's page at its field, in words, never a 500 or the API's
JSON, and nothing is changed."""

from __future__ import annotations

import psycopg
import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client


def _state(world: PanelWorld) -> tuple[object, ...]:
    with psycopg.connect(world.server.database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM holds),"
            " (SELECT string_agg(to_jsonb(b)::text, ',') FROM platform_brake b)"
        ).fetchone()
    assert row is not None
    return tuple(row)


@pytest.mark.parametrize("day", ["0001-01-01", "0001-01-02", "9999-12-31"])
def test_a_hold_until_the_calendars_ends_is_refused_at_its_field(
    panel_world: PanelWorld, day: str
) -> None:
    agent = f"/panel/agents/{panel_world.agent_id}"
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        csrf = csrf_of(editor.get(agent).text)
        before = _state(panel_world)
        answer = editor.post(agent + "/hold", data={"csrf": csrf, "until": day, "reason": "x"})
        bulk = editor.post(
            "/panel/agents/bulk",
            data={
                "csrf": csrf,
                "action": "hold",
                "target": "selected",
                "agent": panel_world.agent_id,
                "until": day,
                "reason": "x",
            },
        )
    for refused in (answer, bulk):
        assert refused.status_code == 422, refused.text[:200]
        assert "Choose a day after today, at most 90 days ahead." in refused.text
    assert _state(panel_world) == before


def test_the_operators_hold_until_the_first_day_is_refused_at_its_field(
    panel_world: PanelWorld,
) -> None:
    key = panel_world.server.create_operator_key()
    page = f"/panel/operator/orgs/{panel_world.org_id}/agents/{panel_world.agent_id}"
    with sign_in_client(panel_world, key) as operator:
        csrf = csrf_of(operator.get(page).text)
        before = _state(panel_world)
        answer = operator.post(
            page,
            data={"csrf": csrf, "action": "hold", "until": "0001-01-01", "reason": "x"},
        )
    assert answer.status_code == 422, answer.text[:200]
    assert "Choose a day after today, at most 90 days ahead." in answer.text
    assert _state(panel_world) == before


@pytest.mark.parametrize("reason", ["stop\u202eevil", "stop\x1b[2J"])
def test_a_brake_reason_with_a_control_is_refused_at_its_field(
    panel_world: PanelWorld, reason: str
) -> None:
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as operator:
        csrf = csrf_of(operator.get("/panel/operator").text)
        before = _state(panel_world)
        answer = operator.post(
            "/panel/operator/brake", data={"csrf": csrf, "engaged": "1", "reason": reason}
        )
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert 'id="reason-error"' in answer.text
    assert _state(panel_world) == before
