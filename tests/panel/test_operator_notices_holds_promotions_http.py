"""The operators' notices, holds, promotions and organisations over HTTP (real control plane, real
PostgreSQL): a notice marked read leaves the count of new ones, an operator holds any agent and ends
the hold, a promotion keeps the reason the form asks for, organisations by name, and who gets each
release on the coming nights — each form with the input its guard exists to stop (no CSRF token, a
bad day, a blank reason, another organisation's agent)."""

from __future__ import annotations

import re

import httpx
import psycopg

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.operator_support import publish_releases
from tests.panel.test_rollout_http import _release_ids, _rollout, halt_by_errors


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def test_an_operator_marks_a_notice_read_and_the_count_of_new_ones_goes_down(
    panel_world: PanelWorld,
) -> None:
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    halt_by_errors(panel_world, _release_ids(panel_world)["1.5.0"])
    with sign_in_client(panel_world, panel_world.server.create_operator_key()) as client:
        inbox = client.get("/panel/operator/notices").text
        assert "Notices (1 new)" in _text(inbox)
        [notice_id] = re.findall(r'action="/panel/operator/notices/([0-9a-f-]{36})/read"', inbox)
        url = f"/panel/operator/notices/{notice_id}/read"
        assert client.post(url, data={"csrf": "forged"}).status_code == 403
        assert client.post(url, data={}).status_code == 403
        assert "Notices (1 new)" in _text(client.get("/panel/operator/notices").text)
        unknown = "/panel/operator/notices/00000000-0000-0000-0000-000000000000/read"
        assert client.post(unknown, data={"csrf": csrf_of(inbox)}).status_code == 404

        read = client.post(url, data={"csrf": csrf_of(inbox)})
        assert read.status_code == 303
        inbox = client.get("/panel/operator/notices").text
        assert "new)" not in _text(inbox)
        assert "Mark as read" not in inbox and "Read " in _text(inbox)
    with sign_in_client(panel_world, panel_world.panel_key) as customer:
        assert customer.post(url, data={"csrf": "x"}).status_code == 404
    with psycopg.connect(panel_world.server.database_url) as conn:
        events = conn.execute(
            "SELECT actor_kind, data->>'notice_id' FROM events WHERE kind = 'notice.read'"
        ).fetchall()
    assert events == [("operator", notice_id)]


def test_an_operator_holds_any_agent_and_ends_the_hold(panel_world: PanelWorld) -> None:
    publish_releases(panel_world, ("1.4.0", 1))
    org, agent = panel_world.org_id, panel_world.agent_id
    url = f"/panel/operator/orgs/{org}/agents/{agent}"
    with sign_in_client(panel_world, panel_world.server.create_operator_key()) as client:
        page = client.get(url).text
        token = csrf_of(page)
        assert "Not held" in page
        for until, reason, field in (
            ("not-a-day", "audit", "until"),
            ("2027-03-20", "audit", "until"),  # in the past
            ("2027-12-24", "audit", "until"),  # more than 90 days ahead
            ("2027-04-02", "  ", "reason"),
        ):
            refused = client.post(
                url, data={"csrf": token, "action": "hold", "until": until, "reason": reason}
            )
            assert refused.status_code == 422, (until, reason)
            assert f'id="hold-{field}-error"' in refused.text, (until, reason)
            assert 'aria-invalid="true"' in refused.text
        forged = client.post(
            url, data={"csrf": "nope", "action": "hold", "until": "2027-04-02", "reason": "x"}
        )
        assert forged.status_code == 403

        # Another organisation's URL with this agent: not found, nothing held.
        other = panel_world.server.create_org("Other")
        wrong = client.post(
            f"/panel/operator/orgs/{other['org_id']}/agents/{agent}",
            data={"csrf": token, "action": "hold", "until": "2027-04-02", "reason": "x"},
        )
        assert wrong.status_code == 404

        done = client.post(
            url,
            data={"csrf": token, "action": "hold", "until": "2027-04-02", "reason": "incident 12"},
        )
        assert done.status_code == 303
        page = client.get(url + "?saved=hold").text
        assert "The agent is held." in page and "held until" in page and "incident 12" in page
        # The customer sees who held it.
        with sign_in_client(panel_world, panel_world.panel_key) as customer:
            assert "held until" in customer.get(f"/panel/agents/{agent}").text

        ended = client.post(url, data={"csrf": token, "action": "unhold"})
        assert ended.status_code == 303
        assert "Not held" in client.get(url).text
    with psycopg.connect(panel_world.server.database_url) as conn:
        events = conn.execute(
            "SELECT kind, actor_kind, data->>'set_by' FROM events WHERE kind LIKE 'hold.%'"
            " ORDER BY id"
        ).fetchall()
    assert [(kind, actor) for kind, actor, _ in events] == [
        ("hold.set", "operator"),
        ("hold.released", "operator"),
    ]
    assert events[0][2] == "operator"


def test_a_promotion_from_the_panel_keeps_its_reason(panel_world: PanelWorld) -> None:
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    ids = _release_ids(panel_world)
    with sign_in_client(panel_world, panel_world.server.create_operator_key()) as client:
        token = csrf_of(client.get("/panel/operator/releases").text)
        blank = _rollout(client, ids["1.5.0"], "promote", "   ", token)
        assert blank.status_code == 422
        done = _rollout(client, ids["1.5.0"], "promote", "canaries quiet for a week", token)
        assert done.status_code == 303
    with psycopg.connect(panel_world.server.database_url) as conn:
        reasons = conn.execute(
            "SELECT data->>'reason' FROM events WHERE kind = 'release.promoted'"
        ).fetchall()
    assert reasons == [("canaries quiet for a week",)]


def test_organisations_are_shown_by_name(panel_world: PanelWorld) -> None:
    panel_world.server.create_org("Zeta Logistics")
    org = panel_world.org_id
    with sign_in_client(panel_world, panel_world.server.create_operator_key()) as client:
        listed = client.get("/panel/operator/orgs").text
        assert ">Acme</a>" in listed and ">Zeta Logistics</a>" in listed
        assert f"<code>{org}</code>" not in listed
        assert "<h1>Acme</h1>" in client.get(f"/panel/operator/orgs/{org}").text
        assert "panel key of organisation Acme" in client.get("/panel/operator/credentials").text


def test_the_coming_nights_say_who_gets_each_release_at_each_stage(
    panel_world: PanelWorld,
) -> None:
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    key = panel_world.server.create_operator_key()
    # Whether the one agent is in 1.5.0's canary share is a hash of two random ids (one run in
    # twenty at the default 5 %): the share is set, so the canary stage counts nobody.
    share = httpx.patch(
        f"{panel_world.server.base_url}/v1/admin/rollout/settings",
        json={"canary_share_percent": 0},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert share.status_code == 200, share.text
    with sign_in_client(panel_world, key) as client:
        html = client.get("/panel/operator").text
    assert "Who gets each release that night, within the caps" in _text(html)
    # One agent on the pair, not a canary, running nothing yet: each night's row says so.
    nights = html.split('id="night-heading"', 1)[1].split("</section>", 1)[0]
    rows = re.findall(r'<th scope="row">stable / linux-x86_64</th>(.*?)</tr>', nights, re.S)
    assert rows
    for row in rows:
        cells = [_text(cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        assert cells[1:] == ["no agent needs it", "1 of 1 agent gets it, 0 misses its window"]
