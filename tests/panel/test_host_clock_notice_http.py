"""A host whose clock is days off is told to the customer before the night it costs: a real
config poll over HTTP whose `Date` is days off makes the agent page say how far and which way,
when it was measured, what it costs and what to do, in every language; the list marks the agent
and finds it under its state; the API's agent views carry the offset. A poll with a right clock
removes all of it, and an agent that says no time (the previous release's) shows nothing."""

from __future__ import annotations

import html
import re
import time
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from control_plane.panel.i18n import LANGUAGES, Language
from control_plane.panel.wording import host_clock_marker, host_clock_notice
from ground.instants import format_http_date
from tests.panel.conftest import PanelWorld, sign_in_client

# Far enough past "3 days 2 hours" that the seconds a test takes never change the words.
BEHIND = timedelta(days=3, hours=2, minutes=30)
AHEAD = timedelta(days=5, hours=7, minutes=30)
ZONE = ZoneInfo("Europe/Amsterdam")  # the platform's, by default


def _poll(world: PanelWorld, wrong_by: timedelta | None) -> datetime:
    """The agent's config poll, saying its host's clock `wrong_by` off the control plane's (None:
    saying no time, as the previous release's agent); the control plane's clock at the poll.

    The control plane's clock is read from an answer that is not the agent's: a poll stamps the
    agent's sighting, and a second poll within `LAST_SEEN_RESOLUTION` writes a clock newly off
    only with the next sighting due (a minute later, at an agent's pace)."""
    with world.client() as client:
        health = client.get("/healthz")
        now = datetime.fromisoformat(health.headers["X-Nachtwacht-Server-Time"])
        headers = {"Authorization": f"Bearer {world.agent_key}"}
        if wrong_by is not None:
            headers["Date"] = format_http_date(now + wrong_by)
        answer = client.get("/v1/agent/config", headers=headers)
    assert answer.status_code == 200
    return now


def _agent(world: PanelWorld) -> dict[str, Any]:
    with world.client(headers={"Authorization": f"Bearer {world.panel_key}"}) as client:
        one = client.get(f"/v1/agents/{world.agent_id}")
        listed = client.get("/v1/agents")
    assert one.status_code == 200 and listed.status_code == 200
    (in_list,) = [a for a in listed.json()["agents"] if a["id"] == world.agent_id]
    fields = ("host_clock_offset_seconds", "host_clock_measured_at")
    assert {k: in_list[k] for k in fields} == {k: one.json()[k] for k in fields}
    body: dict[str, Any] = one.json()
    return body


def _release_views(world: PanelWorld, operator_key: str) -> list[tuple[object, object]]:
    """The host's clock as each agent release view says it: the customer's (one agent, the
    organisation's list) and the operators' (the same two)."""
    fields = ("host_clock_offset_seconds", "host_clock_measured_at")
    found = []
    for key, one, listed in (
        (world.panel_key, f"/v1/agents/{world.agent_id}/release", "/v1/agent-releases"),
        (
            operator_key,
            f"/v1/admin/agents/{world.agent_id}/release",
            f"/v1/admin/orgs/{world.org_id}/agent-releases",
        ),
    ):
        with world.client(headers={"Authorization": f"Bearer {key}"}) as client:
            view = client.get(one)
            views = client.get(listed)
        assert view.status_code == 200 and views.status_code == 200
        (in_list,) = [a for a in views.json()["agents"] if a["agent_id"] == world.agent_id]
        found += [tuple(view.json()[k] for k in fields), tuple(in_list[k] for k in fields)]
    return found


def _settled(world: PanelWorld, kept: bool) -> dict[str, Any]:
    """The agent's API view once the poll's clock is written (a poll answered from memory is
    written with the next batch, a fraction of a second later)."""
    deadline = time.monotonic() + 10
    while True:
        agent = _agent(world)
        if (agent["host_clock_offset_seconds"] is not None) == kept or time.monotonic() > deadline:
            return agent
        time.sleep(0.1)


def _plain(text: str) -> str:
    """`text` with its runs of white space (no-break ones too) as single spaces, as `_words`
    reads a page."""
    return " ".join(text.split())


def _words(page: str, element_id: str) -> str | None:
    if f'id="{element_id}"' not in page:
        return None
    inner = page.split(f'id="{element_id}"', 1)[1].split(">", 1)[1].split("</div>", 1)[0]
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", inner).split()))


def _row(page: str, name: str) -> str:
    row = page.split(f">{name}</a></th>", 1)[1].split("</tr>", 1)[0]
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", row).split()))


def _in(client: httpx.Client, code: str, path: str, **params: str) -> str:
    chosen = client.get(f"/panel/language/{code}", params={"next": "/panel/agents"})
    assert chosen.status_code in (302, 303), chosen.text
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    assert f'<html lang="{code}">' in answer.text
    return answer.text


def _shown(world: PanelWorld, client: httpx.Client, code: str) -> tuple[str | None, str]:
    """The agent page's notice and the list's row of the agent, in language `code`."""
    page = _in(client, code, f"/panel/agents/{world.agent_id}")
    listed = _in(client, code, "/panel/agents")
    return _words(page, "host-clock"), _row(listed, "web-01")


def test_a_poll_days_behind_is_told_in_every_language_until_a_right_clock(
    panel_world: PanelWorld,
) -> None:
    polled_at = _poll(panel_world, -BEHIND)
    agent = _settled(panel_world, kept=True)
    offset = agent["host_clock_offset_seconds"]
    assert abs(offset + BEHIND.total_seconds()) <= 5
    measured = datetime.fromisoformat(agent["host_clock_measured_at"])
    assert polled_at <= measured <= polled_at + timedelta(seconds=30)
    operator_key = panel_world.server.create_operator_key()
    kept = (offset, agent["host_clock_measured_at"])
    assert _release_views(panel_world, operator_key) == [kept] * 4
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        for code in LANGUAGES:
            lang = Language(code)
            notice, row = _shown(panel_world, client, code)
            assert notice is not None, code
            # How far and which way: the length of time, said as behind (never as ahead).
            assert _plain(lang.duration(timedelta(days=3, hours=2))) in notice, code
            assert _plain(host_clock_notice(lang, offset)) in notice, code
            assert _plain(host_clock_notice(lang, -offset)) not in notice, code
            # When it was measured, in the platform's zone.
            assert _plain(lang.moment(measured, ZONE)) in notice, code
            assert "timedatectl set-ntp true" in notice and "chrony" in notice and "123" in notice
            assert _plain(host_clock_marker(lang, offset)) in row, code
            assert _plain(host_clock_marker(lang, -offset)) not in row, code
        english, _ = _shown(panel_world, client, "en")
        assert english is not None
        assert english.startswith(
            "This host's clock is 3 days 2 hours behind: its scheduled updates are missed,"
            " tonight's too, until the clock is set right. Measured when the agent checked in on "
        )
        found = _in(client, "en", "/panel/agents", state="clock")
        assert "1 agent ·" in found and ">web-01</a>" in found

        # Set right: a poll whose clock agrees removes the notice, the marker and the fields.
        _poll(panel_world, timedelta(seconds=2))
        agent = _settled(panel_world, kept=False)
        assert agent["host_clock_offset_seconds"] is None
        assert agent["host_clock_measured_at"] is None
        assert _release_views(panel_world, operator_key) == [(None, None)] * 4
        for code in LANGUAGES:
            notice, row = _shown(panel_world, client, code)
            assert notice is None, code
            assert _plain(host_clock_marker(Language(code), offset)) not in row, code
        gone = _in(client, "en", "/panel/agents", state="clock")
        assert "No agent matches this view." in gone


def test_an_agent_that_says_no_time_shows_nothing(panel_world: PanelWorld) -> None:
    # The previous release's agent sends no `Date`: nothing is known, nothing is said.
    _poll(panel_world, None)
    _poll(panel_world, None)
    time.sleep(0.5)  # a poll answered from memory is written with the next batch
    agent = _agent(panel_world)
    assert agent["host_clock_offset_seconds"] is None
    assert agent["host_clock_measured_at"] is None
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        notice, row = _shown(panel_world, client, "en")
        assert notice is None
        assert "clock" not in row


def test_a_poll_days_ahead_is_said_as_ahead(panel_world: PanelWorld) -> None:
    _poll(panel_world, AHEAD)
    agent = _settled(panel_world, kept=True)
    assert abs(agent["host_clock_offset_seconds"] - AHEAD.total_seconds()) <= 5
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        notice, row = _shown(panel_world, client, "de")
    assert notice is not None
    assert notice.startswith("Die Uhr dieses Hosts geht 5 Tage 7 Stunden vor:")
    assert "Uhr des Hosts geht 5 Tage 7 Stunden vor" in row
