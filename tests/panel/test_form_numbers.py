"""A form field is text: `NaN`, `Infinity` or `1e400` where the panel reads a number (the row to
remove) or a time is refused or ignored like any other bad text — never a 500, never a change."""

from __future__ import annotations

import psycopg
import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client


def _stored(world: PanelWorld) -> tuple[object, ...] | None:
    with psycopg.connect(world.server.database_url) as conn:
        return conn.execute(
            "SELECT update_schedule_enabled, update_schedule_times FROM agents WHERE id = %s",
            [world.agent_id],
        ).fetchone()


@pytest.mark.parametrize(
    "form",
    [
        pytest.param({"remove": "NaN"}, id="remove_nan"),
        pytest.param({"remove": "Infinity"}, id="remove_infinity"),
        pytest.param({"remove": "-Infinity"}, id="remove_minus_infinity"),
        pytest.param({"remove": "1e400"}, id="remove_overflow"),
        pytest.param({"times": "NaN"}, id="time_nan"),
        pytest.param({"times": "1e400"}, id="time_overflow"),
    ],
)
def test_a_non_finite_number_in_the_schedule_form_changes_nothing(
    panel_world: PanelWorld, form: dict[str, str]
) -> None:
    before = _stored(panel_world)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/agents/{panel_world.agent_id}")
        answer = client.post(
            f"/panel/agents/{panel_world.agent_id}/schedule",
            data={"enabled": "1", "times": "04:00", **form, "csrf": csrf_of(page.text)},
        )
    assert answer.status_code == 422, answer.text
    assert "Internal Server Error" not in answer.text
    assert _stored(panel_world) == before
