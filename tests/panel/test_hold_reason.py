"""A hold's reason that says nothing, is too long or holds control characters is refused at its
field, saying the field, the value and what is expected, in the reader's language; nothing is
stored and nothing else changes (a hold already in force stays as it was)."""

from __future__ import annotations

import html
import re

import httpx
import psycopg
import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

# The clock shows Friday 26 March 2027; a hold until a week later is within its bounds.
UNTIL = "2027-04-02"

HOSTILE = [
    pytest.param(
        "",
        "Reason: empty. Say why the updates are held, in at most 500 characters.",
        id="empty",
    ),
    pytest.param(
        "     ",
        "Reason: only spaces. Say why the updates are held, in at most 500 characters.",
        id="only_spaces",
    ),
    pytest.param(
        " \t\u3000\u00a0 ",
        "Reason: only spaces. Say why the updates are held, in at most 500 characters.",
        id="tabs_and_wide_spaces",
    ),
    pytest.param(
        "audit " * 1_700,
        "Reason: “audit audit audit audit audit audit audi…” is too long (10,199 characters)."
        " Say why the updates are held, in at most 500 characters.",
        id="10_kB",
    ),
    pytest.param(
        "audit\x00week",
        "Reason: “audit\ufffdweek” contains a control character (U+0000). Say why the updates"
        " are held, in plain text of at most 500 characters.",
        id="nul",
    ),
    pytest.param(
        "audit \x1b[2J\x07week",
        "Reason: “audit \ufffd[2J\ufffdweek” contains a control character (U+001B). Say why"
        " the updates are held, in plain text of at most 500 characters.",
        id="terminal_escape",
    ),
    pytest.param(
        "Mallory\u202eaudit week",
        "Reason: “Mallory\ufffdaudit week” contains a control character (U+202E). Say why the"
        " updates are held, in plain text of at most 500 characters.",
        id="right_to_left_override",
    ),
    pytest.param(
        "audit\nweek",
        "Reason: “audit\ufffdweek” contains a control character (U+000A). Say why the updates"
        " are held, in plain text of at most 500 characters.",
        id="newline_inside",
    ),
]


def _held(world: PanelWorld) -> list[tuple[object, ...]]:
    with psycopg.connect(world.server.database_url) as conn:
        return conn.execute("SELECT agent_id, until, reason, set_by, set_at FROM holds").fetchall()


def _events(world: PanelWorld) -> list[tuple[object, ...]]:
    with psycopg.connect(world.server.database_url) as conn:
        # The organisation's trail (the worker's own events, such as retention's, come and go).
        return conn.execute(
            "SELECT id, kind FROM events WHERE org_id = %s ORDER BY id", [world.org_id]
        ).fetchall()


def _field_error(page: str, element_id: str) -> str:
    inner = page.split(f'id="{element_id}"', 1)[1].split(">", 1)[1].split("</", 1)[0]
    return html.unescape(re.sub(r"<[^>]+>", "", inner)).strip()


def _hold(client: httpx.Client, world: PanelWorld, reason: str) -> httpx.Response:
    page = client.get(f"/panel/agents/{world.agent_id}")
    return client.post(
        f"/panel/agents/{world.agent_id}/hold",
        data={"until": UNTIL, "reason": reason, "csrf": csrf_of(page.text)},
    )


@pytest.mark.parametrize(("reason", "message"), HOSTILE)
def test_a_reason_that_is_no_reason_is_refused_at_its_field(
    panel_world: PanelWorld, reason: str, message: str
) -> None:
    events = _events(panel_world)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        answer = _hold(client, panel_world, reason)
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert _field_error(answer.text, "hold-reason-error") == message
    assert _field_error(answer.text, "hold-error-summary") == message
    assert 'id="hold-reason"' in answer.text and 'aria-invalid="true"' in answer.text
    assert _held(panel_world) == []
    assert _events(panel_world) == events


def test_the_refusal_is_in_the_readers_language(panel_world: PanelWorld) -> None:
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": "nl"}
    ) as client:
        blank = _hold(client, panel_world, "   ")
        long = _hold(client, panel_world, "x" * 10_000)
    assert _field_error(blank.text, "hold-reason-error") == (
        "Reden: alleen spaties. Schrijf waarom de updates gepauzeerd zijn, in hoogstens 500 tekens."
    )
    assert _field_error(long.text, "hold-reason-error") == (
        "Reden: “xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…” is te lang (10.000 tekens)."
        " Schrijf waarom de updates gepauzeerd zijn, in hoogstens 500 tekens."
    )
    assert _held(panel_world) == []


def test_a_refused_reason_leaves_the_hold_in_force_as_it_was(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        assert _hold(client, panel_world, "  the audit week  ").status_code == 303
        before, events = _held(panel_world), _events(panel_world)
        refused = [_hold(client, panel_world, reason) for reason in ("", " ", "a\x1bb")]
    assert [answer.status_code for answer in refused] == [422, 422, 422]
    assert [row[2] for row in before] == ["the audit week"]
    assert _held(panel_world) == before
    assert _events(panel_world) == events


@pytest.mark.parametrize(("reason", "message"), [HOSTILE[1], HOSTILE[3], HOSTILE[5]])
def test_the_lists_hold_refuses_the_same_reasons(
    panel_world: PanelWorld, reason: str, message: str
) -> None:
    events = _events(panel_world)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get("/panel/agents")
        answer = client.post(
            "/panel/agents/bulk",
            data={
                "csrf": csrf_of(page.text),
                "action": "hold",
                "target": "selected",
                "agent": [panel_world.agent_id],
                "until": UNTIL,
                "reason": reason,
            },
        )
    assert answer.status_code == 422
    assert _field_error(answer.text, "bulk-reason-error") == message
    assert _held(panel_world) == []
    assert _events(panel_world) == events


def test_the_api_refuses_a_reason_with_a_control_character(panel_world: PanelWorld) -> None:
    """`nachtwacht agent status` shows the reason on the host: an escape sequence in it would be
    obeyed by the admin's terminal."""
    with panel_world.client(headers={"Authorization": f"Bearer {panel_world.panel_key}"}) as client:
        answer = client.put(
            f"/v1/agents/{panel_world.agent_id}/hold",
            json={"until": "2027-04-02T00:00:00+02:00", "reason": "audit \x1b[2J"},
        )
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert detail["field"] == "reason"
    assert detail["message"] == (
        "reason: 'audit \\x1b[2J' contains the control character U+001B (plain text)"
    )
    assert _held(panel_world) == []
