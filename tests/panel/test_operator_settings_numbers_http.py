"""The operators' settings read a number as the panel's fields do: ASCII digits only. What
Python's `int` alone would also read (`1_0`, a sign, another script's digits) is refused at its
field, and the settings stay as they were."""

from __future__ import annotations

import psycopg
import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client


def _settings(world: PanelWorld) -> list[tuple[object, ...]]:
    with psycopg.connect(world.server.database_url) as conn:
        return conn.execute("SELECT * FROM platform_settings").fetchall()


@pytest.mark.parametrize("typed", ["1_0", "+5", "-0", "\u0663", "\u0968", "\uff15", "5.0"])
def test_a_number_not_written_in_ascii_digits_is_refused(
    panel_world: PanelWorld, typed: str
) -> None:
    with sign_in_client(panel_world, panel_world.server.create_operator_key()) as client:
        page = client.get("/panel/operator")
        before = _settings(panel_world)
        answer = client.post(
            "/panel/operator/settings",
            data={
                "csrf": csrf_of(page.text),
                "timezone": "Europe/Amsterdam",
                "catch_up_minutes": "15",
                "org_cap": typed,
                "global_cap": "25",
            },
        )
        assert answer.status_code == 422, answer.headers.get("location")
        assert 'id="org_cap-error"' in answer.text
    assert _settings(panel_world) == before
