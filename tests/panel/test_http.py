"""The panel over HTTP, without a browser: sign-in, cookies, CSRF, expiry, revocation, isolation."""

from __future__ import annotations

import psycopg

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client


def test_pages_need_a_session(panel_world: PanelWorld) -> None:
    with panel_world.client() as client:
        answer = client.get("/panel/agents")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/panel/sign-in"


def test_session_cookie_is_httponly_strict_and_not_secure_over_http(
    panel_world: PanelWorld,
) -> None:
    with panel_world.client() as client:
        token = csrf_of(client.get("/panel/sign-in").text)
        answer = client.post("/panel/sign-in", data={"key": panel_world.panel_key, "csrf": token})
    cookie = next(
        value
        for name, value in answer.headers.multi_items()
        if name == "set-cookie" and value.startswith("nw_panel_session=")
    )
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/panel" in cookie
    assert "Secure" not in cookie


def test_session_cookie_is_secure_behind_https(panel_world: PanelWorld) -> None:
    headers = {"X-Forwarded-Proto": "https"}
    with panel_world.client(headers=headers) as client:
        form = client.get("/panel/sign-in")
        token = csrf_of(form.text)
        answer = client.post(
            "/panel/sign-in",
            data={"key": panel_world.panel_key, "csrf": token},
            # Marked Secure, the cookie would not go back over this test's plain-http loopback.
            headers={"Cookie": f"nw_panel_signin={form.cookies['nw_panel_signin']}"},
        )
    cookies = [v for n, v in answer.headers.multi_items() if n == "set-cookie"]
    assert any(c.startswith("nw_panel_session=") and "Secure" in c for c in cookies), cookies


def test_sign_in_without_the_forms_token_is_refused(panel_world: PanelWorld) -> None:
    with panel_world.client() as client:
        client.get("/panel/sign-in")
        answer = client.post("/panel/sign-in", data={"key": panel_world.panel_key, "csrf": "x"})
    assert answer.status_code == 401
    assert "nw_panel_session=" not in answer.headers.get("set-cookie", "")


def test_an_agent_key_does_not_sign_in(panel_world: PanelWorld) -> None:
    with panel_world.client() as client:
        token = csrf_of(client.get("/panel/sign-in").text)
        answer = client.post("/panel/sign-in", data={"key": panel_world.agent_key, "csrf": token})
    assert answer.status_code == 401


def test_a_form_without_its_csrf_token_changes_nothing(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        url = f"/panel/agents/{panel_world.agent_id}/schedule"
        forged = client.post(url, data={"enabled": "1", "times": "04:00", "csrf": "forged"})
        missing = client.post(url, data={"enabled": "1", "times": "04:00"})
        page = client.get(f"/panel/agents/{panel_world.agent_id}")
    assert forged.status_code == 403
    assert missing.status_code == 403
    assert 'value="03:00"' in page.text
    assert 'value="04:00"' not in page.text


def test_a_schedule_saved_with_its_token_is_stored(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/agents/{panel_world.agent_id}")
        answer = client.post(
            f"/panel/agents/{panel_world.agent_id}/schedule",
            data={"enabled": "1", "times": ["04:00", "02:30"], "csrf": csrf_of(page.text)},
        )
        assert answer.status_code == 303
    with psycopg.connect(panel_world.server.database_url) as conn:
        row = conn.execute(
            "SELECT update_schedule_times FROM agents WHERE id = %s", [panel_world.agent_id]
        ).fetchone()
    assert row == (["02:30", "04:00"],)


def test_the_error_summary_names_the_time_field_of_each_error(panel_world: PanelWorld) -> None:
    """Two rows can hold the same text: the summary at the top says which field each error is
    at ("Time 2: …"), as the message beside the field does by its place."""
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/agents/{panel_world.agent_id}")
        answer = client.post(
            f"/panel/agents/{panel_world.agent_id}/schedule",
            data={"enabled": "1", "times": ["02:30", "02:30"], "csrf": csrf_of(page.text)},
        )
    assert answer.status_code == 422
    summary = answer.text.split('id="error-summary"', 1)[1].split("</div>", 1)[0]
    assert "Time 2: 02:30 is already in the list; each time may appear once." in summary


def test_tonight_says_which_days_slots_it_shows(panel_world: PanelWorld) -> None:
    """ "Tonight" is a local day's slots (tomorrow's from the morning on), named in words; the
    hours around it are in `test_tonight.py`. The clock shows 12:00 CET on Friday 26 March 2027,
    so the page is about Saturday's slots."""
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get("/panel/forecast")
    assert page.status_code == 200
    assert (
        "The coming night: the update slots of Sat, March 27. Times are in Europe/Amsterdam."
        in page.text
    )


def test_an_expired_session_sends_the_reader_to_sign_in(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        assert client.get("/panel/agents").status_code == 200
        with psycopg.connect(panel_world.server.database_url) as conn:
            conn.execute(
                "UPDATE panel_sessions SET expires_at = created_at + interval '1 microsecond'"
            )
        answer = client.get("/panel/agents")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/panel/sign-in?ended=1"


def test_an_idle_session_ends(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        with psycopg.connect(panel_world.server.database_url) as conn:
            conn.execute(
                "UPDATE panel_sessions SET created_at = created_at - interval '2 hours',"
                " last_seen_at = last_seen_at - interval '31 minutes'"
            )
        answer = client.get("/panel/agents")
    assert answer.status_code == 303


def test_revoking_the_key_ends_its_sessions(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        assert client.get("/panel/agents").status_code == 200
        with psycopg.connect(panel_world.server.database_url) as conn:
            conn.execute("UPDATE credentials SET revoked_at = now() WHERE audience = 'panel'")
        answer = client.get("/panel/agents")
    assert answer.status_code == 303


def test_sign_out_ends_the_session_on_the_server(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        secret = client.cookies["nw_panel_session"]
        page = client.get("/panel/agents")
        answer = client.post("/panel/sign-out", data={"csrf": csrf_of(page.text)})
        assert answer.headers["location"] == "/panel/sign-in?signed_out=1"
    with panel_world.client(cookies={"nw_panel_session": secret}) as replay:
        assert replay.get("/panel/agents").status_code == 303


def test_another_organisations_agent_is_not_found(panel_world: PanelWorld) -> None:
    other = panel_world.server.create_org("Globex")
    theirs = panel_world.server.enroll_agent(other["org_id"], "their-agent")
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/agents/{theirs['agent_id']}")
        token = csrf_of(client.get("/panel/agents").text)
        change = client.post(
            f"/panel/agents/{theirs['agent_id']}/schedule",
            data={"enabled": "1", "times": "04:00", "csrf": token},
        )
        update = client.post(f"/panel/agents/{theirs['agent_id']}/update", data={"csrf": token})
        nonsense = client.get("/panel/agents/not-an-id")
    assert page.status_code == 404
    assert "their-agent" not in page.text
    assert change.status_code == 404
    assert update.status_code == 404
    assert nonsense.status_code == 404


def test_a_customer_cannot_open_the_operator_screens(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        assert client.get("/panel/operator").status_code == 404


def test_an_operator_signs_in_to_the_operator_screens(panel_world: PanelWorld) -> None:
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        page = client.get("/panel/operator")
        assert page.status_code == 200
        assert client.get("/panel/agents").status_code == 404
        refused = client.post(
            "/panel/operator/brake",
            data={"engaged": "1", "reason": " ", "csrf": csrf_of(page.text)},
        )
        assert refused.status_code == 422
        engaged = client.post(
            "/panel/operator/brake",
            data={"engaged": "1", "reason": "1.5.0 breaks TLS", "csrf": csrf_of(page.text)},
        )
        assert engaged.status_code == 303
        assert "1.5.0 breaks TLS" in client.get("/panel/operator").text


def test_the_operator_sees_the_last_24_hours_as_pictures(panel_world: PanelWorld) -> None:
    # The panel's clock shows 2027-03-26 11:00 UTC: a round and a slot two hours before it.
    earlier = "2027-03-26T09:00:00Z"
    with psycopg.connect(panel_world.server.database_url) as conn:
        conn.execute(
            "INSERT INTO claim_rounds_global (round_start, granted) VALUES (%s, 7)", [earlier]
        )
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, miss_reason,"
            " created_at) VALUES (%s, %s, 'schedule', '2027-03-26T10:00', %s, 'missed',"
            " 'offline', %s)",
            [panel_world.agent_id, panel_world.org_id, earlier, earlier],
        )
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        page = client.get("/panel/operator").text
    assert "Updates granted per minute in the last 24 hours" in page
    assert "Outcomes per slot in the last 24 hours" in page
    assert "Missed updates by reason in the last 24 hours" in page
    # One bar of grants, one slot's missed run, and that miss under its reason: each class is
    # on that one bar and on its legend's mark.
    assert page.count('class="chart-granted"') == 2
    assert page.count('class="chart-missed"') == 2
    assert page.count('class="chart-miss-offline"') == 2
    assert "No update was granted in the last 24 hours." not in page


def test_the_language_link_only_leads_inside_the_panel(panel_world: PanelWorld) -> None:
    with panel_world.client() as client:
        away = client.get("/panel/language/de", params={"next": "https://evil.example/"})
        slashes = client.get("/panel/language/de", params={"next": "//evil.example/panel/"})
        inside = client.get("/panel/language/de", params={"next": "/panel/agents"})
    assert away.headers["location"] == "/panel/"
    assert slashes.headers["location"] == "/panel/"
    assert inside.headers["location"] == "/panel/agents"
    assert "nw_panel_language=de" in inside.headers["set-cookie"]


def test_language_from_accept_language_else_english(panel_world: PanelWorld) -> None:
    with panel_world.client() as client:
        polish = client.get("/panel/sign-in", headers={"Accept-Language": "pl-PL,pl;q=0.9"})
        unknown = client.get("/panel/sign-in", headers={"Accept-Language": "ja, ko;q=0.5"})
        chosen = client.get(
            "/panel/sign-in",
            headers={"Accept-Language": "pl", "Cookie": "nw_panel_language=sv"},
        )
    assert '<html lang="pl">' in polish.text
    assert '<html lang="en">' in unknown.text
    assert '<html lang="sv">' in chosen.text


def test_pages_load_nothing_from_elsewhere(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/agents/{panel_world.agent_id}")
        css = client.get("/panel/static/panel.css")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "http://" not in page.text.replace(panel_world.server.base_url, "")
    assert "https://" not in page.text.replace("https://…", "")
    assert css.status_code == 200


def test_docs_load_nothing_from_elsewhere(panel_world: PanelWorld) -> None:
    with panel_world.client() as client:
        docs = client.get("/docs")
        script = client.get("/docs-assets/swagger-ui-bundle.js")
        css = client.get("/docs-assets/swagger-ui.css")
        schema = client.get("/openapi.json")
    assert docs.status_code == 200
    assert "/docs-assets/swagger-ui-bundle.js" in docs.text
    assert "cdn." not in docs.text
    assert "https://" not in docs.text
    assert script.status_code == 200
    assert len(script.content) > 100_000
    assert css.status_code == 200
    assert not any(path.startswith("/panel") for path in schema.json()["paths"])


def test_the_agent_page_and_list_show_the_version_of_nachtwachts_own_agent(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        before = client.get(f"/panel/agents/{panel_world.agent_id}")
    assert '<dd id="updater-version">unknown</dd>' in before.text
    # As a host's claim or run report keeps it.
    with psycopg.connect(panel_world.server.database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO agent_updater_versions (agent_id, version, reported_at)"
            " VALUES (%s, '2.1.0', now())",
            [panel_world.agent_id],
        )
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/agents/{panel_world.agent_id}")
        listed = client.get("/panel/agents")
    assert '<dd id="updater-version">2.1.0</dd>' in page.text
    assert "nachtwacht agent 2.1.0" in listed.text
