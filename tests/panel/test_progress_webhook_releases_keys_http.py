"""The progress, webhook, release and key screens over HTTP: the webhook's test delivery against a
real receiver on loopback, a manual update's progress (page and JSON), the operators' releases and
credentials, the fleet by version, the sessions on real time — each with the input its guard exists
to stop."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

import psycopg

from tests.conftest import RunningControlPlane
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.operator_support import (
    agent_reports,
    publish_releases,
    set_webhook,
    webhook_receiver,
)

SPRING = datetime(2027, 3, 26, 11, 0, tzinfo=UTC)


def test_a_test_delivery_arrives_signed_and_is_recorded(loopback_world: PanelWorld) -> None:
    with (
        webhook_receiver(204, now=SPRING) as receiver,
        sign_in_client(loopback_world, loopback_world.panel_key) as client,
    ):
        set_webhook(loopback_world, receiver.url)
        token = csrf_of(client.get("/panel/webhook").text)
        sent = client.post("/panel/webhook/test", data={"csrf": token})
        # Post/redirect/get: the result is said on the page the redirect opens, and a reload
        # of that page sends nothing again.
        assert sent.status_code == 303
        assert sent.headers["location"] == "/panel/webhook#test-result"
        answer = client.get("/panel/webhook")
        assert "The test arrived: your address answered HTTP 204." in answer.text
        assert len(receiver.received) == 1
        body, signed = receiver.received[0]
        assert signed, "the receiver could not check the signature"
        assert json.loads(body)["kind"] == "test"
        # Recorded: the page shows the last test after a reload, from the trail.
        assert "The test arrived" in client.get("/panel/webhook").text
    with psycopg.connect(loopback_world.server.database_url) as conn:
        row = conn.execute(
            "SELECT actor_kind, data FROM events WHERE kind = 'webhook.tested'"
        ).fetchone()
    assert row is not None and row[0] == "user" and row[1]["status_code"] == 204


def test_a_refusing_receiver_is_shown_in_words(loopback_world: PanelWorld) -> None:
    with (
        webhook_receiver(500, now=SPRING) as receiver,
        sign_in_client(
            loopback_world, loopback_world.panel_key, headers={"Accept-Language": "de"}
        ) as client,
    ):
        set_webhook(loopback_world, receiver.url)
        token = csrf_of(client.get("/panel/webhook").text)
        answer = client.post("/panel/webhook/test", data={"csrf": token}, follow_redirects=True)
    assert "Der Test ist nicht angekommen: Ihre Adresse antwortete HTTP 500" in answer.text
    assert "did not arrive" not in answer.text


def test_the_test_delivery_keeps_to_the_address_policy(panel_world: PanelWorld) -> None:
    """The plain world allows no private network: a loopback address is refused, never sent."""
    with (
        webhook_receiver(204, now=SPRING) as receiver,
        sign_in_client(panel_world, panel_world.panel_key) as client,
    ):
        set_webhook(panel_world, receiver.url)  # stored behind the API's back, as an old row
        token = csrf_of(client.get("/panel/webhook").text)
        answer = client.post("/panel/webhook/test", data={"csrf": token}, follow_redirects=True)
    assert "The test was not sent: the address is not one we may send to" in answer.text
    assert receiver.received == []


def test_the_test_delivery_needs_its_csrf_token(loopback_world: PanelWorld) -> None:
    with (
        webhook_receiver(204, now=SPRING) as receiver,
        sign_in_client(loopback_world, loopback_world.panel_key) as client,
    ):
        set_webhook(loopback_world, receiver.url)
        answer = client.post("/panel/webhook/test", data={"csrf": "forged"})
    assert answer.status_code == 403
    assert receiver.received == []


def _run_id(location: str) -> str:
    found = re.search(r"/updates/([0-9a-f-]{36})$", location)
    assert found is not None, location
    return found.group(1)


def test_update_now_shows_its_progress_to_the_outcome(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        agent = f"/panel/agents/{panel_world.agent_id}"
        token = csrf_of(client.get(agent).text)
        clicked = client.post(f"{agent}/update", data={"csrf": token})
        assert clicked.status_code == 303
        run_id = _run_id(clicked.headers["location"])
        progress = client.get(clicked.headers["location"])
        # Without script the page refreshes itself while the update runs, and has a link.
        assert '<noscript><meta http-equiv="refresh"' in progress.text
        polled = client.get(f"{agent}/updates/{run_id}.json").json()
        assert polled["done"] is False
        assert [s["state"] for s in polled["steps"]][:2] == ["done", "current"]
        with psycopg.connect(panel_world.server.database_url) as conn:
            conn.execute(
                "UPDATE runs SET status = 'claimed', claimed_at = now() WHERE id = %s", [run_id]
            )
        polled = client.get(f"{agent}/updates/{run_id}.json").json()
        assert polled["steps"][2]["state"] == "current"
        with psycopg.connect(panel_world.server.database_url) as conn:
            conn.execute(
                "UPDATE runs SET status = 'rolled_back', finished_at = now() WHERE id = %s",
                [run_id],
            )
        polled = client.get(f"{agent}/updates/{run_id}.json").json()
        assert polled["done"] is True and polled["good"] is False
        assert polled["outcome"] == "rolled back; the previous version keeps running"
        finished = client.get(f"{agent}/updates/{run_id}")
        assert "http-equiv" not in finished.text


def test_another_organisations_update_is_not_found(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        agent = f"/panel/agents/{panel_world.agent_id}"
        token = csrf_of(client.get(agent).text)
        run_id = _run_id(client.post(f"{agent}/update", data={"csrf": token}).headers["location"])
    other = panel_world.server.create_org("Other")
    with sign_in_client(panel_world, other["panel_key"]) as client:
        assert client.get(f"{agent}/updates/{run_id}").status_code == 404
        assert client.get(f"{agent}/updates/{run_id}.json").status_code == 404


def test_withdrawing_a_release_needs_a_reason_and_names_who_runs_it(
    panel_world: PanelWorld,
) -> None:
    publish_releases(panel_world, ("1.5.0", 42), ("1.6.0", 43))
    agent_reports(panel_world, "1.6.0")
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        page = client.get("/panel/operator/releases").text
        assert "current" in page and "previous (offered again" in page
        token = csrf_of(page)
        match = re.search(
            r'/panel/operator/releases/([0-9a-f-]{36})/withdraw"[^>]*>\s*'
            r'<input type="hidden" name="csrf"[^>]*>\s*<label for="reason-[^"]+">'
            r"Why withdraw 1\.6\.0",
            page,
        )
        assert match is not None
        release_id = match.group(1)
        refused = client.post(
            f"/panel/operator/releases/{release_id}/withdraw", data={"csrf": token, "reason": " "}
        )
        assert refused.status_code == 422
        assert f'id="reason-{release_id}" name="reason"' in refused.text
        assert 'aria-invalid="true"' in refused.text
        forged = client.post(
            f"/panel/operator/releases/{release_id}/withdraw",
            data={"csrf": "forged", "reason": "breaks TLS"},
        )
        assert forged.status_code == 403
        done = client.post(
            f"/panel/operator/releases/{release_id}/withdraw",
            data={"csrf": token, "reason": "breaks TLS"},
        )
        assert done.status_code == 303
        listed = client.get(done.headers["location"]).text
    assert "breaks TLS" in listed
    assert "1 agent still runs it:" in listed and "web-01" in listed
    # The agent's organisation by its name, not its id.
    assert 'web-01 <span class="hint">(Acme)</span>' in listed


def test_a_customer_cannot_open_the_operators_screens(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        assert client.get("/panel/operator/releases").status_code == 404
        assert client.get("/panel/operator/credentials").status_code == 404


def test_credentials_rotate_shows_the_secret_once_and_revoke_asks_first(
    panel_world: PanelWorld,
) -> None:
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        page = client.get("/panel/operator/credentials").text
        token = csrf_of(page)
        assert "first panel key" in page
        named = client.post(
            "/panel/operator/credentials",
            data={"csrf": token, "audience": "panel", "name": "Ops at Acme", "org_id": "nope"},
        )
        assert named.status_code == 422 and 'id="org_id-error"' in named.text
        issued = client.post(
            "/panel/operator/credentials",
            data={
                "csrf": token,
                "audience": "panel",
                "name": "Ops at Acme",
                "org_id": panel_world.org_id,
            },
        )
        secret = re.search(r"<code>(nwp_[^<]+)</code>", issued.text)
        assert secret is not None
        assert secret.group(1) not in client.get("/panel/operator/credentials").text
        # Rotating the customer's first key: a new secret, the old key refused at once.
        first = re.search(
            r'/panel/operator/credentials/([0-9a-f-]{36})/rotate"[^>]*>\s*(?:<input[^>]*>\s*)+'
            r"<button[^>]*>Rotate first panel key",
            page,
        )
        assert first is not None
        rotated = client.post(
            f"/panel/operator/credentials/{first.group(1)}/rotate", data={"csrf": token}
        )
        assert re.search(r"<code>nwp_[^<]+</code>", rotated.text)
        with panel_world.client() as customer:
            form = customer.get("/panel/sign-in")
            refused = customer.post(
                "/panel/sign-in", data={"key": panel_world.panel_key, "csrf": csrf_of(form.text)}
            )
            assert refused.status_code == 401
        # Revoking asks first (a page, not the act), and the act needs its token.
        ops = re.search(
            r'/panel/operator/credentials/([0-9a-f-]{36})/revoke">Revoke Ops at Acme',
            client.get("/panel/operator/credentials").text,
        )
        assert ops is not None
        confirm = client.get(f"/panel/operator/credentials/{ops.group(1)}/revoke")
        assert "Yes, revoke Ops at Acme" in confirm.text
        assert (
            client.post(
                f"/panel/operator/credentials/{ops.group(1)}/revoke", data={"csrf": "x"}
            ).status_code
            == 403
        )
        revoked = client.post(
            f"/panel/operator/credentials/{ops.group(1)}/revoke", data={"csrf": token}
        )
        assert revoked.status_code == 303
        after = client.get(revoked.headers["location"]).text
    assert "The key is revoked" in after
    assert "Revoke Ops at Acme" not in after


def test_the_fleet_by_version_counts_agents_per_pair(panel_world: PanelWorld) -> None:
    publish_releases(panel_world, ("1.5.0", 42))
    agent_reports(panel_world, "1.5.0")
    panel_world.server.enroll_agent(panel_world.org_id, "web-02")  # no version reported yet
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        page = client.get("/panel/operator").text
    fleet = page.split('id="fleet-heading"', 1)[1].split("</section>", 1)[0]
    assert "stable/linux-x86_64: 1.5.0 1" in fleet
    assert "pair not known" in fleet and "no version reported 1" in fleet


def test_a_session_runs_on_real_time_on_a_fast_clock(
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    """`demo --keep` serves the panel on its fast clock: an hour of product time must not end a
    session that a person used a second ago (the idle limit is 30 minutes)."""
    server = control_plane_server(
        fake_clock=f"2027-03-26T11:00:00Z,anchor={time.time()},speed=3600"
    )
    org = server.create_org("Acme")
    world = PanelWorld(
        server=server, org_id=org["org_id"], panel_key=org["panel_key"], agent_id="", agent_key=""
    )
    with sign_in_client(world, world.panel_key) as client:
        assert client.get("/panel/agents").status_code == 200
        time.sleep(1.0)  # one real second: an hour on this clock, twice the idle limit
        still = client.get("/panel/agents")
    assert still.status_code == 200, still.headers.get("location")


def _post_forms(html: str) -> list[str]:
    return re.findall(r'<form method="post"[^>]*>.*?</form>', html, flags=re.DOTALL)


def test_every_form_of_these_screens_carries_its_csrf_token(panel_world: PanelWorld) -> None:
    publish_releases(panel_world, ("1.5.0", 42))
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        set_webhook(panel_world, "https://example.test/hook")
        agent = f"/panel/agents/{panel_world.agent_id}"
        token = csrf_of(client.get(agent).text)
        progress = client.post(f"{agent}/update", data={"csrf": token}).headers["location"]
        customer_pages = [client.get(path).text for path in (agent, progress, "/panel/webhook")]
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        credentials = client.get("/panel/operator/credentials").text
        revoke = re.search(
            r'href="(/panel/operator/credentials/[0-9a-f-]{36}/revoke)"', credentials
        )
        assert revoke is not None
        operator_pages = [
            client.get("/panel/operator").text,
            client.get("/panel/operator/releases").text,
            credentials,
            client.get(revoke.group(1)).text,
        ]
    forms = [form for html in customer_pages + operator_pages for form in _post_forms(html)]
    assert len(forms) >= 10
    for form in forms:
        assert re.search(r'<input type="hidden" name="csrf" value="[^"]+">', form), form[:200]


def test_issuing_and_rotating_a_key_refuse_a_forged_form(panel_world: PanelWorld) -> None:
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        page = client.get("/panel/operator/credentials").text
        rotate = re.search(r'action="(/panel/operator/credentials/[0-9a-f-]{36}/rotate)"', page)
        assert rotate is not None
        issued = client.post(
            "/panel/operator/credentials",
            data={"csrf": "forged", "audience": "operator", "name": "mallory"},
        )
        rotated = client.post(rotate.group(1), data={"csrf": "forged"})
        after = client.get("/panel/operator/credentials").text
    assert issued.status_code == 403 and rotated.status_code == 403
    assert "mallory" not in after and "nwo_" not in rotated.text


def test_the_progress_poll_of_a_signed_out_reader_is_a_status_not_a_page(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        agent = f"/panel/agents/{panel_world.agent_id}"
        token = csrf_of(client.get(agent).text)
        run = _run_id(client.post(f"{agent}/update", data={"csrf": token}).headers["location"])
    with panel_world.client() as stranger:
        answer = stranger.get(f"{agent}/updates/{run}.json")
    assert answer.status_code == 401
    assert answer.headers["content-type"] == "application/json"


def test_a_webhook_address_the_policy_refuses_is_said_apart_from_a_malformed_one(
    panel_world: PanelWorld,
) -> None:
    """A well-formed loopback address is refused for where it points, naming it: the message
    for a malformed address ("with a host name, without a user name") would send the customer
    looking for a typo that is not there."""
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/webhook").text)
        refused = client.post(
            "/panel/webhook", data={"csrf": token, "url": "http://127.0.0.1:8080/hook"}
        )
        malformed = client.post("/panel/webhook", data={"csrf": token, "url": "ftp://x.example"})
    assert refused.status_code == 422
    assert "Address http://127.0.0.1:8080/hook: we send only to public addresses" in refused.text
    assert "without a user name or password" not in refused.text
    assert malformed.status_code == 422
    assert "without a user name or password" in malformed.text
    assert "we send only to public addresses" not in malformed.text


def test_a_refused_webhook_address_is_quoted_with_its_controls_shown(
    panel_world: PanelWorld,
) -> None:
    """The address the policy refuses is named in the refusal; a bidirectional control in it is
    shown as U+FFFD there, never obeyed (it would turn the rest of the sentence around)."""
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/webhook").text)
        before = _webhook_rows(panel_world)
        answer = client.post(
            "/panel/webhook", data={"csrf": token, "url": "http://127.0.0.1/\u202ekoohbew"}
        )
    assert answer.status_code == 422
    said = re.search(r'id="url-error">([^<]*)<', answer.text)
    assert said is not None
    assert "http://127.0.0.1/\ufffdkoohbew" in said.group(1)
    assert "\u202e" not in said.group(1)
    assert _webhook_rows(panel_world) == before


def _webhook_rows(world: PanelWorld) -> list[tuple[object, ...]]:
    with psycopg.connect(world.server.database_url) as conn:
        return conn.execute("SELECT * FROM webhooks").fetchall()
