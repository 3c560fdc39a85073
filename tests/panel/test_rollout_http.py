"""The panel's rollout screens over HTTP (real control plane, real PostgreSQL): a release's stage,
halt and brake with their forms (a reason required), the operators' notices and their count, the
organisations' and agents' pins, canary marking, a forced update, and the customer's hold — each
with the input its guard exists to stop (no CSRF token, a blank reason, a bad day, another
organisation's agent)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
import psycopg

from control_plane.database import open_pool
from control_plane.panel.i18n import LANGUAGES
from control_plane.rollout.services import RolloutService
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.operator_support import publish_releases

# The fixtures' fake clock starts here (conftest's SPRING_CLOCK_START).
NOW = datetime(2027, 3, 26, 11, tzinfo=UTC)


def _release_ids(world: PanelWorld) -> dict[str, str]:
    with psycopg.connect(world.server.database_url) as conn:
        rows = conn.execute("SELECT agent_version, id FROM releases").fetchall()
    return {version: str(release_id) for version, release_id in rows}


def _rollout(
    client: httpx.Client, release_id: str, action: str, reason: str, token: str
) -> httpx.Response:
    return client.post(
        f"/panel/operator/releases/{release_id}/rollout",
        data={"csrf": token, "action": action, "reason": reason},
    )


def _row(client: httpx.Client, release_id: str) -> str:
    page = client.get("/panel/operator/releases").text
    return page.split(f'id="release-{release_id}"', 1)[1].split("</tr>", 1)[0]


def test_the_releases_screen_shows_stages_and_works_the_rollout(panel_world: PanelWorld) -> None:
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    ids = _release_ids(panel_world)
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        page = client.get("/panel/operator/releases").text
        token = csrf_of(page)
        # The first release of a pair is at everyone, the next one starts as a canary.
        row = page.split(f'id="release-{ids["1.5.0"]}"', 1)[1].split("</tr>", 1)[0]
        assert "canary (a first few agents)" in row
        assert 'value="promote"' in row

        # Every action needs a reason and the session's token.
        blank = _rollout(client, ids["1.5.0"], "halt", "  ", token)
        assert blank.status_code == 422
        assert f'id="rollout-reason-{ids["1.5.0"]}-error"' in blank.text
        forged = _rollout(client, ids["1.5.0"], "halt", "bad build", "forged")
        assert forged.status_code == 403
        assert "Halted" not in client.get("/panel/operator/releases").text

        done = _rollout(client, ids["1.5.0"], "halt", "TLS breaks on 1.5.0", token)
        assert done.status_code == 303
        page = client.get("/panel/operator/releases?done=halt").text
        row = page.split(f'id="release-{ids["1.5.0"]}"', 1)[1].split("</tr>", 1)[0]
        assert "TLS breaks on 1.5.0" in row and 'value="resume"' in row
        # A halted release cannot be halted again: refused at its form, nothing changes.
        again = _rollout(client, ids["1.5.0"], "halt", "twice", token)
        assert again.status_code == 409
        assert "does not allow that now" in again.text

        assert _rollout(client, ids["1.5.0"], "resume", "fixed upstream", token).status_code == 303
        assert _rollout(client, ids["1.5.0"], "promote", "canaries fine", token).status_code == 303
        page = client.get("/panel/operator/releases").text
        row = page.split(f'id="release-{ids["1.5.0"]}"', 1)[1].split("</tr>", 1)[0]
        assert "everyone" in row and 'value="promote"' not in row
        # Promoting again: not a canary any more.
        assert _rollout(client, ids["1.5.0"], "promote", "again", token).status_code == 409

        assert _rollout(client, ids["1.5.0"], "brake", "disk fills up", token).status_code == 303
        row = _row(client, ids["1.5.0"])
        assert "Its brake is on" in row and "disk fills up" in row and 'value="unbrake"' in row
        assert _rollout(client, ids["1.5.0"], "unbrake", "fixed", token).status_code == 303
        row = _row(client, ids["1.5.0"])
        assert "Its brake is on" not in row

    with psycopg.connect(panel_world.server.database_url) as conn:
        kinds = [
            r[0]
            for r in conn.execute(
                "SELECT kind FROM events WHERE kind IN ('release.halted', 'release.resumed',"
                " 'release.promoted') OR kind LIKE 'brake.%'"
                " ORDER BY id"
            ).fetchall()
        ]
    assert kinds == [
        "release.halted",
        "release.resumed",
        "release.promoted",
        "brake.engaged",
        "brake.released",
    ]


def halt_by_errors(world: PanelWorld, release_id: str) -> None:
    """Three failed runs of the release in the window, then the reconcile step (the real
    `RolloutService.advance`) halts it by itself and leaves one notice."""
    with psycopg.connect(world.server.database_url) as conn:
        for day in (18, 19, 20):
            conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, version,"
                " release_id, created_at, finished_at) VALUES (%s, %s, 'schedule', %s, %s,"
                " 'failed', '1.5.0', %s, %s, %s)",
                [
                    world.agent_id,
                    world.org_id,
                    f"2027-03-{day}T03:00",
                    datetime(2027, 3, day, 2, tzinfo=UTC),
                    release_id,
                    NOW - timedelta(hours=2),
                    NOW - timedelta(hours=1, minutes=day),
                ],
            )
    pool = open_pool(world.server.database_url, min_size=1, max_size=1)
    try:
        step = RolloutService(pool).advance(NOW)
    finally:
        pool.close()
    assert [str(h.release_id) for h in step.halts] == [release_id]


def test_an_automatic_halt_shows_its_evidence_and_counts_in_the_navigation(
    panel_world: PanelWorld,
) -> None:
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    ids = _release_ids(panel_world)
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        assert "new)" not in client.get("/panel/operator").text
        halt_by_errors(panel_world, ids["1.5.0"])
        overview = client.get("/panel/operator").text
        assert "Notices (1 new)" in re.sub(r"<[^>]+>", "", overview)
        inbox = client.get("/panel/operator/notices").text
        assert "was halted automatically" in inbox and "3 of 3" in inbox
        assert "3 runs tripped the halt" in inbox
        row = _row(client, ids["1.5.0"])
        assert "Halted automatically" in row
        with psycopg.connect(panel_world.server.database_url) as conn:
            runs = conn.execute(
                "SELECT id FROM runs WHERE release_id = %s", [ids["1.5.0"]]
            ).fetchall()
        # Each tripping run is a row naming its agent and organisation.
        assert len(runs) == 3 and all(f'id="halt-run-{run[0]}"' in row for run in runs)
        assert row.count("web-01 (Acme): from — to 1.5.0, failed<") == 3
        # The rollout tonight on the operators' page: the pair's release, halted.
        assert "The rollout tonight" in overview and "halted" in overview


def test_the_operators_page_says_the_waves_and_which_one_each_release_is_in(
    panel_world: PanelWorld,
) -> None:
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        page = re.sub(r"<[^>]+>", "", client.get("/panel/operator").text)
    assert (
        "Waves: the marked canaries and 5% of the agents → 10% of the agents → 50% of the"
        " agents → everyone; each moves on after its soak without failures." in page
    )
    assert "1.5.0 — canary (a first few agents) (wave 1 of 4)" in page


def test_pins_canaries_and_a_forced_update_from_the_operators_agent_page(
    panel_world: PanelWorld,
) -> None:
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    key = panel_world.server.create_operator_key()
    org, agent = panel_world.org_id, panel_world.agent_id
    with sign_in_client(panel_world, key) as client:
        assert org in client.get("/panel/operator/orgs").text
        page = client.get(f"/panel/operator/orgs/{org}").text
        token = csrf_of(page)
        assert f"/panel/operator/orgs/{org}/agents/{agent}" in page

        # The organisation's pin: a version that was never published is refused at its field.
        bad = client.post(
            f"/panel/operator/orgs/{org}/pin",
            data={"csrf": token, "version": "9.9.9", "reason": "audit"},
        )
        assert bad.status_code == 422 and 'id="org-pin-version-error"' in bad.text
        blank = client.post(
            f"/panel/operator/orgs/{org}/pin",
            data={"csrf": token, "version": "1.4.0", "reason": ""},
        )
        assert blank.status_code == 422 and 'id="org-pin-reason-error"' in blank.text
        forged = client.post(
            f"/panel/operator/orgs/{org}/pin",
            data={"csrf": "x", "version": "1.4.0", "reason": "audit"},
        )
        assert forged.status_code == 403
        done = client.post(
            f"/panel/operator/orgs/{org}/pin",
            data={"csrf": token, "version": "1.4.0", "reason": "audit week"},
        )
        assert done.status_code == 303
        page = client.get(f"/panel/operator/orgs/{org}").text
        assert "pinned to 1.4.0" in page and "audit week" in page

        url = f"/panel/operator/orgs/{org}/agents/{agent}"
        assert "pin applies: pinned to 1.4.0" in client.get(url).text
        held = client.post(
            url,
            data={"csrf": token, "action": "pin", "hold_at_running": "1", "reason": "db host"},
        )
        assert held.status_code == 303
        assert "held at the version it runs" in client.get(url).text
        assert client.post(url, data={"csrf": token, "action": "unpin"}).status_code == 303
        assert (
            client.post(f"/panel/operator/orgs/{org}/pin", data={"csrf": token, "action": "unpin"})
        ).status_code == 303
        assert "Not pinned" in client.get(url).text

        marked = client.post(url, data={"csrf": token, "action": "canary", "canary": "1"})
        assert marked.status_code == 303
        assert 'name="canary" value="1" checked' in client.get(url).text

        no_reason = client.post(url, data={"csrf": token, "action": "force", "reason": " "})
        assert no_reason.status_code == 422 and 'id="force-reason-error"' in no_reason.text
        forced = client.post(url, data={"csrf": token, "action": "force", "reason": "hotfix"})
        assert forced.status_code == 303

        # Another organisation's agent under this organisation's URL is not found.
        other = panel_world.server.create_org("Other")
        assert (
            client.get(f"/panel/operator/orgs/{other['org_id']}/agents/{agent}").status_code == 404
        )
        wrong = client.post(
            f"/panel/operator/orgs/{other['org_id']}/agents/{agent}",
            data={"csrf": token, "action": "force", "reason": "x"},
        )
        assert wrong.status_code == 404

    with psycopg.connect(panel_world.server.database_url) as conn:
        forced_rows = conn.execute("SELECT reason FROM forced_updates").fetchall()
        kinds = [
            r[0]
            for r in conn.execute(
                "SELECT kind FROM events WHERE kind IN ('pin.set', 'pin.removed',"
                " 'canary.marked', 'update.forced') ORDER BY id"
            ).fetchall()
        ]
    assert forced_rows == [("hotfix",)]
    assert kinds == [
        "pin.set",
        "pin.set",
        "pin.removed",
        "pin.removed",
        "canary.marked",
        "update.forced",
    ]


def test_a_customer_holds_an_agent_until_a_day_and_ends_the_hold(panel_world: PanelWorld) -> None:
    publish_releases(panel_world, ("1.4.0", 1))
    agent = panel_world.agent_id
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/agents/{agent}").text
        token = csrf_of(page)
        assert "Not held" in page and "stable / linux-x86_64" in page

        for until, reason, field in (
            ("not-a-day", "audit", "until"),
            ("2027-03-20", "audit", "until"),  # in the past
            ("2027-12-24", "audit", "until"),  # more than 90 days ahead
            ("2027-04-02", "  ", "reason"),
        ):
            refused = client.post(
                f"/panel/agents/{agent}/hold",
                data={"csrf": token, "until": until, "reason": reason},
            )
            assert refused.status_code == 422, (until, reason)
            assert f'id="hold-{field}-error"' in refused.text, (until, reason)
        forged = client.post(
            f"/panel/agents/{agent}/hold",
            data={"csrf": "nope", "until": "2027-04-02", "reason": "audit"},
        )
        assert forged.status_code == 403

        done = client.post(
            f"/panel/agents/{agent}/hold",
            data={"csrf": token, "until": "2027-04-02", "reason": "audit week"},
        )
        assert done.status_code == 303
        page = client.get(f"/panel/agents/{agent}?held=set").text
        assert "held until" in page and "set in the panel" in page and "audit week" in page
        listed = client.get("/panel/agents").text
        assert "held until" in listed and "1.4.0" in listed

        # Another organisation's agent: not found, and nothing is held there.
        other = panel_world.server.create_org("Other")
        stranger = panel_world.server.enroll_agent(other["org_id"], "db-01")
        theirs = client.post(
            f"/panel/agents/{stranger['agent_id']}/hold",
            data={"csrf": token, "until": "2027-04-02", "reason": "x"},
        )
        assert theirs.status_code == 404
        assert (
            client.post(
                f"/panel/agents/{stranger['agent_id']}/hold/end", data={"csrf": token}
            ).status_code
            == 404
        )

        assert client.post(f"/panel/agents/{agent}/hold/end", data={"csrf": "x"}).status_code == 403
        assert "held until" in client.get(f"/panel/agents/{agent}").text
        ended = client.post(f"/panel/agents/{agent}/hold/end", data={"csrf": token})
        assert ended.status_code == 303
        assert "Not held" in client.get(f"/panel/agents/{agent}").text

    with psycopg.connect(panel_world.server.database_url) as conn:
        holds = conn.execute("SELECT count(*) FROM holds").fetchone()
        kinds = [
            r[0]
            for r in conn.execute(
                "SELECT kind FROM events WHERE kind LIKE 'hold.%' ORDER BY id"
            ).fetchall()
        ]
    assert holds == (0,)
    assert kinds == ["hold.set", "hold.released"]


def _forms_without_token(html: str) -> list[str]:
    forms = re.findall(r'<form method="post"[^>]*>.*?</form>', html, flags=re.S)
    assert forms, "the page has no form"
    return [form[:80] for form in forms if 'name="csrf" value="' not in form]


def test_every_form_of_the_rollout_screens_carries_its_token(panel_world: PanelWorld) -> None:
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    org, agent = panel_world.org_id, panel_world.agent_id
    with sign_in_client(panel_world, panel_world.server.create_operator_key()) as client:
        for path in (
            "/panel/operator/releases",
            f"/panel/operator/orgs/{org}",
            f"/panel/operator/orgs/{org}/agents/{agent}",
        ):
            assert _forms_without_token(client.get(path).text) == [], path
        # A forged token on the agent page's forms changes nothing.
        url = f"/panel/operator/orgs/{org}/agents/{agent}"
        for data in (
            {"action": "canary", "canary": "1"},
            {"action": "force", "reason": "hotfix"},
            {"action": "pin", "version": "1.4.0", "reason": "audit"},
        ):
            assert client.post(url, data={**data, "csrf": "forged"}).status_code == 403
        page = client.get(url).text
        assert 'value="1" checked' not in page and "Not pinned" in page
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        html = client.get(f"/panel/agents/{agent}").text
        assert _forms_without_token(html) == []
    with psycopg.connect(panel_world.server.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM forced_updates").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM canary_agents").fetchone() == (0,)


def test_a_customer_cannot_open_the_operators_rollout_screens(panel_world: PanelWorld) -> None:
    org, agent = panel_world.org_id, panel_world.agent_id
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/agents").text)
        for path in (
            "/panel/operator/notices",
            "/panel/operator/orgs",
            f"/panel/operator/orgs/{org}",
            f"/panel/operator/orgs/{org}/agents/{agent}",
        ):
            assert client.get(path).status_code == 404, path
        forced = client.post(
            f"/panel/operator/orgs/{org}/agents/{agent}",
            data={"csrf": token, "action": "force", "reason": "mine"},
        )
        assert forced.status_code == 404


def test_the_canary_checkbox_shows_the_operators_marking_not_the_share(
    panel_world: PanelWorld,
) -> None:
    # With a first wave of 100 % every agent is in the canary group of a release in its canary
    # stage; the checkbox must still show (and change) only what an operator marked, or unticking
    # it would look like it did nothing.
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    org, agent = panel_world.org_id, panel_world.agent_id
    url = f"/panel/operator/orgs/{org}/agents/{agent}"
    operator_key = panel_world.server.create_operator_key()
    api = f"{panel_world.server.base_url}/v1/admin"
    bearer = {"Authorization": f"Bearer {operator_key}"}
    share = httpx.patch(
        f"{api}/rollout/settings",
        json={"waves": [{"share_percent": 100}, {"share_percent": 100}]},
        headers=bearer,
    )
    assert share.status_code == 200, share.text
    before = httpx.get(f"{api}/agents/{agent}/release", headers=bearer).json()
    assert (before["canary"], before["canary_marked"]) == (True, False)
    with sign_in_client(panel_world, operator_key) as client:
        page = client.get(url).text
        assert 'name="canary" value="1">' in page and 'value="1" checked' not in page
        token = csrf_of(page)
        marked = client.post(url, data={"csrf": token, "action": "canary", "canary": "1"})
        assert marked.status_code == 303
        assert 'name="canary" value="1" checked' in client.get(url).text
    after = httpx.get(f"{api}/agents/{agent}/release", headers=bearer).json()
    assert (after["canary"], after["canary_marked"]) == (True, True)


def test_the_customers_agent_page_says_its_release_is_stopped_in_every_language(
    panel_world: PanelWorld,
) -> None:
    publish_releases(panel_world, ("1.4.0", 1))
    release_id = _release_ids(panel_world)["1.4.0"]
    agent = panel_world.agent_id
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        assert 'id="offer-stopped"' not in client.get(f"/panel/agents/{agent}").text
    key = panel_world.server.create_operator_key()
    with panel_world.client(headers={"Authorization": f"Bearer {key}"}) as operator:
        halted = operator.post(f"/v1/admin/releases/{release_id}/halt", json={"reason": "TLS-4711"})
    assert halted.status_code == 200, halted.text
    halt_lines = _stopped_lines(panel_world, agent)
    assert len(set(halt_lines.values())) == len(LANGUAGES)

    # Resumed, then under its own brake: the words say only this release's rollout is paused,
    # not that the operators halted it, in every language.
    with panel_world.client(headers={"Authorization": f"Bearer {key}"}) as operator:
        resumed = operator.post(f"/v1/admin/releases/{release_id}/resume", json={"reason": "ok"})
        assert resumed.status_code == 200, resumed.text
        braked = operator.put(
            f"/v1/admin/releases/{release_id}/brake",
            json={"engaged": True, "reason": "TLS-4711"},
        )
        assert braked.status_code == 200, braked.text
    brake_lines = _stopped_lines(panel_world, agent)
    assert all(brake_lines[code] != halt_lines[code] for code in LANGUAGES)

    # Brake released; the release halted by its failure rate: worded as automatic, in every
    # language unlike the operators' halt and the brake.
    with panel_world.client(headers={"Authorization": f"Bearer {key}"}) as operator:
        released = operator.put(
            f"/v1/admin/releases/{release_id}/brake", json={"engaged": False, "reason": "ok"}
        )
        assert released.status_code == 200, released.text
    with psycopg.connect(panel_world.server.database_url) as conn:
        conn.execute(
            "INSERT INTO release_halts (release_id, halted_at, cause, reason, halted_by,"
            " failures, finished) VALUES (%s, now(), 'errors', 'TLS-4711', 'automatic', 3, 3)",
            [release_id],
        )
    automatic_lines = _stopped_lines(panel_world, agent)
    for code in LANGUAGES:
        assert automatic_lines[code] not in (halt_lines[code], brake_lines[code])
    assert "halted automatically because too many of its updates failed" in automatic_lines["en"]
    assert "halted by our operators" in halt_lines["en"]
    assert "Only this release is paused" in brake_lines["en"]


def _stopped_lines(panel_world: PanelWorld, agent: str) -> dict[str, str]:
    """The customer's agent page's line about its stopped release, by language."""
    lines = {}
    for code in LANGUAGES:
        with sign_in_client(panel_world, panel_world.panel_key) as client:
            client.cookies.set("nw_panel_language", code)
            page = client.get(f"/panel/agents/{agent}").text
        assert f'<html lang="{code}">' in page
        line = page.split('id="offer-stopped">', 1)[1].split("</p>", 1)[0]
        assert "1.4.0" in line
        # The operators' own words for the stop are theirs, not the customer's.
        assert "TLS-4711" not in line
        lines[code] = line
    return lines
