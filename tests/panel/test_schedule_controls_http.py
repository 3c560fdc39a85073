"""A schedule's time holding a control character or a bidirectional control, sent to the agent's
editor, the schedule for new agents and the list's bulk schedule: refused at its row, in each of
the nine languages, with the characters shown as U+FFFD, never obeyed (a right-to-left override
quoted as it came would turn the rest of the sentence around), and nothing is stored."""

from __future__ import annotations

import html
import re
from urllib.parse import urlencode

import pytest

from control_plane.panel.i18n import LANGUAGES, Language
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.worlds.rows import rows_at

_TABLES = ("agents", "events", "orgs")
_ERRORS = re.compile(r'class="(?:field-error|error)"[^>]*>(.*?)</', re.S)
_FORM = {"content-type": "application/x-www-form-urlencoded"}
BIDI_AND_CONTROLS = ["03:00\u202e", "\u202e03:00", "03:00\u2066", "03:00\x07", "03:00\x1b[2J"]


def _rows(world: PanelWorld) -> dict[str, list[str]]:
    return rows_at(world.server.database_url, _TABLES)


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_time_with_a_control_is_quoted_seen_not_obeyed(
    panel_world: PanelWorld, code: str
) -> None:
    lang = Language(code)
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": code}
    ) as client:
        token = csrf_of(client.get(f"/panel/agents/{panel_world.agent_id}").text)
        before = _rows(panel_world)
        forms = [
            (f"/panel/agents/{panel_world.agent_id}/schedule", []),
            ("/panel/default-schedule", []),
            (
                "/panel/agents/schedules",
                [("agent", panel_world.agent_id), ("target", "selected")],
            ),
        ]
        for action, extra in forms:
            for time in BIDI_AND_CONTROLS:
                data = [("csrf", token), ("enabled", "1"), ("times", time), *extra]
                answer = client.post(action, content=urlencode(data), headers=_FORM)
                assert answer.status_code in {400, 422}, (action, time, answer.status_code)
                said = [html.unescape(error) for error in _ERRORS.findall(answer.text)]
                expected = lang.gettext(
                    "%(value)s is not a time of day. Write it as HH:MM on the 24-hour clock, "
                    "for example 03:05.",
                    value=re.sub(r"[\x00-\x1f\u202e\u2066]", "\ufffd", time),
                )
                assert expected in said, (action, repr(time), said)
                assert not any(re.search(r"[\x00-\x1f\u202a-\u202e\u2066-\u2069]", s) for s in said)
        assert _rows(panel_world) == before
