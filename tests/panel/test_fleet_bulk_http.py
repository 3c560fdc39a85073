"""The agent list's filters "pinned" and "not on the release it is offered", and its bulk
actions over HTTP against the real control plane: hold, end the hold and update now, for the
selected agents or every agent of the view — one change per agent on the trail, named by the
panel key that made it; all or none; CSRF; errors at the field; and the number on the button
that must still be the view's."""

from __future__ import annotations

from uuid import UUID

import httpx
import psycopg
import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.test_agent_list_http import add_agents, listed_names

_RELEASE = (
    "INSERT INTO releases (manifest_version, agent_version, channel, platform, issued_at,"
    " expires, length, sha256, key_id, manifest, signature, published_at, stage)"
    " VALUES (%s, %s, 'stable', 'linux-x86_64', now(), now() + interval '30 days', 1,"
    " repeat('a', 64), 'k', '\\x00', '\\x00', now(), 'everyone') RETURNING id"
)
_RAN = (
    "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, version,"
    " created_at, finished_at) VALUES (%s, %s, 'schedule', '2027-03-23T03:00',"
    " '2027-03-23T02:00Z', 'succeeded', %s, '2027-03-23T02:05Z', '2027-03-23T02:10Z')"
)


def trail(world: PanelWorld, kind: str) -> list[tuple[str, str, str]]:
    """Per change of `kind`: the agent's name, the actor's kind and its credential's name."""
    with psycopg.connect(world.server.database_url) as conn:
        rows = conn.execute(
            "SELECT a.name, e.actor_kind, c.name FROM events e JOIN agents a ON a.id = e.agent_id"
            " JOIN credentials c ON c.id = e.actor_id WHERE e.kind = %s AND e.org_id = %s"
            " ORDER BY a.name",
            [kind, UUID(world.org_id)],
        ).fetchall()
    return [(agent, actor, key) for agent, actor, key in rows]


def seed_offer_fleet(world: PanelWorld) -> dict[str, str]:
    """web-01 and twelve more agents by name, their ids: new-* run the offered 1.6.0, old-* run
    1.5.0, pin-* are pinned (each by its own pin) to the 1.5.0 they run and quiet-* have reported
    nothing."""
    names = [f"new-{i}" for i in range(3)] + [f"old-{i}" for i in range(4)]
    names += [f"pin-{i}" for i in range(2)] + [f"quiet-{i}" for i in range(3)]
    ids = add_agents(world, names)
    org = UUID(world.org_id)
    with psycopg.connect(world.server.database_url) as conn:
        conn.execute(_RELEASE, [1, "1.5.0"])
        new = conn.execute(_RELEASE, [2, "1.6.0"]).fetchone()
        assert new is not None
        conn.execute(
            "INSERT INTO current_releases (channel, platform, release_id, changed_at)"
            " VALUES ('stable', 'linux-x86_64', %s, now())"
            " ON CONFLICT (channel, platform) DO UPDATE SET release_id = EXCLUDED.release_id",
            [new[0]],
        )
        for name, agent_id in ids.items():
            version = {"new": "1.6.0", "old": "1.5.0", "pin": "1.5.0"}.get(name.split("-")[0])
            if version is not None:
                conn.execute(_RAN, [UUID(agent_id), org, version])
                # As the run's report would: what an agent runs is kept on its row.
                conn.execute(
                    "UPDATE agents SET current_version = %s WHERE id = %s",
                    [version, UUID(agent_id)],
                )
        for name in ("pin-0", "pin-1"):
            conn.execute(
                "INSERT INTO pins (agent_id, version, reason, set_at, set_by)"
                " VALUES (%s, '1.5.0', 'tested', now(), 'operator')",
                [UUID(ids[name])],
            )
    ids["web-01"] = world.agent_id
    return ids


# Not on the release it is offered: the old ones run 1.5.0 (offered 1.6.0); the pinned ones run
# their pin (up to date); the quiet ones and web-01 have reported nothing.
BEHIND = [*(f"old-{i}" for i in range(4)), *(f"quiet-{i}" for i in range(3)), "web-01"]


@pytest.fixture
def fleet(panel_world: PanelWorld) -> tuple[PanelWorld, dict[str, str]]:
    return panel_world, seed_offer_fleet(panel_world)


def _post(
    client: httpx.Client, url: str, data: dict[str, object], path: str = "/panel/agents/bulk"
) -> httpx.Response:
    page = client.get(url)
    # A change answers with a redirect to the list (POST/redirect/GET), followed here.
    return client.post(path, data={"csrf": csrf_of(page.text), **data}, follow_redirects=True)


def test_the_pinned_filter_finds_the_pinned_agents(
    fleet: tuple[PanelWorld, dict[str, str]],
) -> None:
    world, _ = fleet
    with sign_in_client(world, world.panel_key) as client:
        answer = client.get("/panel/agents", params={"state": "pinned"})
    assert answer.status_code == 200
    assert listed_names(answer.text) == ["pin-0", "pin-1"]


def test_an_organisations_pin_pins_all_its_agents(
    fleet: tuple[PanelWorld, dict[str, str]],
) -> None:
    world, _ = fleet
    with psycopg.connect(world.server.database_url) as conn:
        conn.execute(
            "INSERT INTO pins (org_id, version, set_at, set_by) VALUES (%s, '1.5.0', now(), 'op')",
            [UUID(world.org_id)],
        )
    with sign_in_client(world, world.panel_key) as client:
        answer = client.get("/panel/agents", params={"state": "pinned"})
    assert len(listed_names(answer.text)) == 13


def test_not_on_the_offered_release_follows_the_offer_rule(
    fleet: tuple[PanelWorld, dict[str, str]],
) -> None:
    world, _ = fleet
    with sign_in_client(world, world.panel_key) as client:
        answer = client.get("/panel/agents", params={"state": "behind"})
        searched = client.get("/panel/agents", params={"state": "behind", "q": "OLD"})
    assert answer.status_code == 200
    assert listed_names(answer.text) == BEHIND
    assert listed_names(searched.text) == [f"old-{i}" for i in range(4)]
    assert 'value="behind" selected' in answer.text


def test_a_filtered_page_past_the_end_names_the_last_page(
    fleet: tuple[PanelWorld, dict[str, str]],
) -> None:
    world, _ = fleet
    with sign_in_client(world, world.panel_key) as client:
        failed = client.get("/panel/agents", params={"state": "failed", "page": "2"})
        behind = client.get("/panel/agents", params={"state": "behind", "page": "2"})
    for answer in (failed, behind):
        assert answer.status_code == 400
        assert "Page: “2” is not accepted. Give a whole number from 1 to 1." in answer.text


def test_hold_every_agent_of_a_view_one_change_each(
    fleet: tuple[PanelWorld, dict[str, str]],
) -> None:
    world, _ = fleet
    with sign_in_client(world, world.panel_key) as client:
        answer = _post(
            client,
            "/panel/agents?state=behind&q=old",
            {
                "action": "hold",
                "target": "matching",
                "count": "4",
                "state": "behind",
                "q": "old",
                "until": "2027-04-02",
                "reason": "quarter close",
            },
        )
        held = client.get("/panel/agents", params={"state": "held"})
    assert answer.status_code == 200, answer.text
    assert "4 agents are held until April 2." in answer.text
    assert trail(world, "hold.set") == [(f"old-{i}", "user", "first panel key") for i in range(4)]
    assert listed_names(held.text) == [f"old-{i}" for i in range(4)]


def test_end_the_hold_of_the_selected_agents(fleet: tuple[PanelWorld, dict[str, str]]) -> None:
    world, ids = fleet
    with sign_in_client(world, world.panel_key) as client:
        _post(
            client,
            "/panel/agents",
            {
                "action": "hold",
                "target": "selected",
                "agent": [ids["new-0"], ids["new-1"]],
                "until": "2027-04-02",
                "reason": "quarter close",
            },
        )
        answer = _post(
            client,
            "/panel/agents",
            {"action": "release", "target": "selected", "agent": [ids["new-0"], ids["new-2"]]},
        )
    assert answer.status_code == 200, answer.text
    assert "The hold of 1 agent ended. 1 agent had no hold." in answer.text
    assert trail(world, "hold.released") == [("new-0", "user", "first panel key")]


def test_update_now_for_the_selected_agents_as_for_one(
    fleet: tuple[PanelWorld, dict[str, str]],
) -> None:
    world, ids = fleet
    selected = [ids["old-0"], ids["old-1"]]
    with sign_in_client(world, world.panel_key) as client:
        answer = _post(client, "/panel/agents", {"action": "update", "agent": selected})
        again = _post(client, "/panel/agents", {"action": "update", "agent": selected})
    assert answer.status_code == 200, answer.text
    assert "An update now was asked for 2 agents" in answer.text
    assert "An update now was asked for 0 agents" in again.text
    assert "2 agents already had one waiting." in again.text
    assert trail(world, "update.requested") == [
        ("old-0", "user", "first panel key"),
        ("old-1", "user", "first panel key"),
    ]
    with psycopg.connect(world.server.database_url) as conn:
        pending = conn.execute(
            "SELECT count(*) FROM runs WHERE trigger = 'manual' AND status = 'requested'"
        ).fetchone()
    assert pending == (2,)


def test_a_view_that_changed_since_its_button_changes_nothing(
    fleet: tuple[PanelWorld, dict[str, str]],
) -> None:
    world, _ = fleet
    with sign_in_client(world, world.panel_key) as client:
        page = client.get("/panel/agents", params={"q": "old"})
        add_agents(world, ["old-late"])
        answer = client.post(
            "/panel/agents/bulk",
            data={
                "csrf": csrf_of(page.text),
                "action": "update",
                "target": "matching",
                "q": "old",
                "count": "4",
            },
        )
        schedule = client.post(
            "/panel/agents/schedules",
            data={
                "csrf": csrf_of(page.text),
                "times": "02:00",
                "enabled": "1",
                "target": "matching",
                "q": "old",
                "count": "4",
            },
        )
    message = (
        "This view now finds 5 agents, not the number on the button: check the list and choose"
        " again."
    )
    assert answer.status_code == 422
    assert f'<p class="field-error" id="bulk-count-error">{message}</p>' in answer.text
    assert schedule.status_code == 422
    assert f'<p class="field-error" id="bulk-agent-error">{message}</p>' in schedule.text
    assert trail(world, "update.requested") == []
    assert trail(world, "schedule.changed") == []


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        pytest.param(
            {"until": "2027-03-26", "reason": "x"},
            "bulk-until",
            "Choose a day after today, at most 90 days ahead.",
            id="today",
        ),
        pytest.param(
            {"until": "2027-09-01", "reason": "x"},
            "bulk-until",
            "Choose a day after today, at most 90 days ahead.",
            id="too_far",
        ),
        pytest.param(
            {"until": "next week", "reason": "x"},
            "bulk-until",
            "Choose a day after today, at most 90 days ahead.",
            id="not_a_day",
        ),
        pytest.param(
            {"until": "2027-04-02", "reason": "  "},
            "bulk-reason",
            "Reason: only spaces. Say why the updates are held, in at most 500 characters.",
            id="no_reason",
        ),
    ],
)
def test_a_bad_hold_changes_nothing_and_says_why_at_the_field(
    fleet: tuple[PanelWorld, dict[str, str]], data: dict[str, str], field: str, message: str
) -> None:
    world, ids = fleet
    with sign_in_client(world, world.panel_key) as client:
        answer = _post(client, "/panel/agents", {"action": "hold", "agent": [ids["old-0"]], **data})
    assert answer.status_code == 422
    assert f'<p class="field-error" id="{field}-error">{message}</p>' in answer.text
    assert trail(world, "hold.set") == []


def test_a_bulk_action_on_no_selected_agent_changes_nothing_and_says_why(
    fleet: tuple[PanelWorld, dict[str, str]],
) -> None:
    world, _ = fleet
    with sign_in_client(world, world.panel_key) as client:
        answer = _post(client, "/panel/agents", {"action": "update", "target": "selected"})
    message = "Select between 1 and 50 agents on this page."
    assert answer.status_code == 422
    assert f'<p class="field-error" id="bulk-agent-action-error">{message}</p>' in answer.text
    assert trail(world, "update.requested") == []


def test_in_dutch_the_error_is_in_dutch(fleet: tuple[PanelWorld, dict[str, str]]) -> None:
    world, _ = fleet
    with sign_in_client(world, world.panel_key, headers={"Accept-Language": "nl"}) as client:
        answer = _post(client, "/panel/agents", {"action": "update"})
    assert answer.status_code == 422
    assert "Selecteer" in answer.text, answer.text[:3000]


def test_bulk_actions_need_the_csrf_token_and_the_organisations_agents(
    fleet: tuple[PanelWorld, dict[str, str]],
) -> None:
    world, ids = fleet
    other = world.server.create_org("Other")
    theirs = world.server.enroll_agent(other["org_id"], "theirs")
    with sign_in_client(world, world.panel_key) as client:
        forged = client.post(
            "/panel/agents/bulk",
            data={"csrf": "forged", "action": "update", "agent": [ids["old-0"]]},
        )
        foreign = _post(
            client,
            "/panel/agents",
            {"action": "update", "agent": [ids["old-0"], theirs["agent_id"]]},
        )
        unknown = _post(client, "/panel/agents", {"action": "delete", "agent": [ids["old-0"]]})
    assert forged.status_code == 403
    assert foreign.status_code == 404
    assert unknown.status_code == 404
    # All or none: the organisation's own agent got no update either.
    assert trail(world, "update.requested") == []
