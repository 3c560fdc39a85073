"""A panel form whose field is over the bound its route declares gets a page in the reader's
language naming the field, the value (shortened; never a secret) and what is expected, with a
link back to the form — never the API's English JSON; nothing is stored and the trail is
unchanged. The operator's hold checks its reason as the customer's does."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from control_plane.panel.i18n import Language
from tests.panel.conftest import PanelWorld, check_accessibility, csrf_of, sign_in_client
from tests.panel.test_browser_languages import BROWSER_LOCALES

ORG, AGENT, SOME = "{org}", "{agent}", str(uuid.uuid4())


def _text(page: str, element_id: str) -> list[str]:
    inner = page.split(f'id="{element_id}"', 1)[1].split("</div>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", inner, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", item)).strip() for item in items]


def _state(world: PanelWorld) -> list[object]:
    """Everything a panel form could write: the trail and the tables its forms change."""
    tables = (
        "events",
        "holds",
        "pins",
        "credentials",
        "enrollment_tokens",
        "people",
        "platform_brake",
        "platform_settings",
        "webhooks",
    )
    # The server's own worker writes to the trail as its clock runs (a retention walk completed):
    # no form writes as the control plane.
    own = sql.SQL(" WHERE actor_kind IS DISTINCT FROM 'control_plane'")
    with psycopg.connect(world.server.database_url) as conn:
        return [
            conn.execute(
                sql.SQL(
                    "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {} t"
                    "{}"
                ).format(sql.Identifier(table), own if table == "events" else sql.SQL(""))
            ).fetchone()
            for table in tables
        ]


# (who, form page, form's address, the other fields, the field over its bound, its bound, the
# message's start): every panel form with a bounded field a person types.
FORMS = [
    pytest.param(
        "customer", "/panel/webhook", "/panel/webhook", {}, "url", 2100, "Address", id="webhook_url"
    ),
    pytest.param(
        "customer",
        "/panel/webhook",
        "/panel/webhook",
        {"url": "https://a.example/"},
        "secret",
        300,
        "Signing secret",
        id="webhook_secret",
    ),
    pytest.param(
        "customer",
        "/panel/enrollment",
        "/panel/enrollment",
        {"uses": "1", "hours": "1"},
        "label",
        300,
        "What it is for",
        id="enrollment_label",
    ),
    pytest.param(
        "customer",
        "/panel/enrollment",
        "/panel/enrollment",
        {"uses": "1", "hours": "1"},
        "name_pattern",
        300,
        "Agent names must match",
        id="enrollment_pattern",
    ),
    pytest.param(
        "customer",
        "/panel/people",
        "/panel/people",
        {"email": "a@example.com", "role": "viewer"},
        "name",
        400,
        "Name",
        id="people_name",
    ),
    pytest.param(
        "customer",
        "/panel/people",
        "/panel/people",
        {"name": "Ann", "role": "viewer"},
        "email",
        400,
        "E-mail address",
        id="people_email",
    ),
    pytest.param(
        "customer",
        "/panel/agents",
        "/panel/agents/bulk",
        {"action": "hold", "reason": "audit", "agent": AGENT},
        "until",
        40,
        "Hold until",
        id="bulk_until",
    ),
    pytest.param(
        "operator",
        f"/panel/operator/orgs/{ORG}",
        f"/panel/operator/orgs/{ORG}/pin",
        {"version": "1.0.0"},
        "reason",
        2000,
        "Reason",
        id="org_pin_reason",
    ),
    pytest.param(
        "operator",
        "/panel/operator",
        "/panel/operator/brake",
        {"engaged": "1"},
        "reason",
        2000,
        "Reason",
        id="brake_reason",
    ),
    pytest.param(
        "operator",
        "/panel/operator/releases",
        f"/panel/operator/releases/{SOME}/withdraw",
        {},
        "reason",
        2000,
        "Reason",
        id="release_withdraw_reason",
    ),
    pytest.param(
        "operator",
        "/panel/operator/releases",
        f"/panel/operator/releases/{SOME}/rollout",
        {"action": "halt"},
        "reason",
        2000,
        "Reason",
        id="release_halt_reason",
    ),
    pytest.param(
        "operator",
        "/panel/operator",
        "/panel/operator/settings",
        {"catch_up_minutes": "30", "org_cap": "10", "global_cap": "100"},
        "timezone",
        100,
        "Time zone of every schedule",
        id="settings_timezone",
    ),
    pytest.param(
        "operator",
        "/panel/operator/credentials",
        "/panel/operator/credentials",
        {"audience": "operator"},
        "name",
        300,
        "Name",
        id="credential_name",
    ),
    pytest.param(
        "operator",
        "/panel/operator/people",
        "/panel/operator/people",
        {"email": "o@example.com"},
        "name",
        400,
        "Name",
        id="operator_people_name",
    ),
]


def _client(world: PanelWorld, who: str, **kwargs: object) -> httpx.Client:
    key = world.panel_key if who == "customer" else world.server.create_operator_key()
    return sign_in_client(world, key, **kwargs)  # type: ignore[return-value]


@pytest.mark.parametrize(("who", "form", "action", "others", "field", "bound", "label"), FORMS)
def test_a_field_over_its_bound_gets_a_page_naming_it(
    panel_world: PanelWorld,
    who: str,
    form: str,
    action: str,
    others: dict[str, str],
    field: str,
    bound: int,
    label: str,
) -> None:
    ids = {"org": panel_world.org_id, "agent": panel_world.agent_id}
    form, action = form.format(**ids), action.format(**ids)
    sent = "é" + "x" * bound  # one over, and not only ASCII
    with _client(panel_world, who) as client:
        page = client.get(form)
        assert page.status_code == 200, page.text
        before = _state(panel_world)
        data = {key: value.format(**ids) for key, value in others.items()}
        data.update({"csrf": csrf_of(page.text), field: sent})
        answer = client.post(action, data=data, headers={"Referer": str(page.url)})
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    count = f"{bound + 1:,}"
    limit = f"{bound:,}"
    if field == "secret":
        expected = (
            f"{label}: too long ({count} characters). At most {limit} characters are accepted."
        )
        assert "xxxxxxxx" not in answer.text
    else:
        expected = (
            f"{label}: “é{'x' * 39}…” is too long ({count} characters)."
            f" At most {limit} characters are accepted."
        )
    assert _text(answer.text, "form-refused") == [expected]
    assert f'href="{form}"' in answer.text
    assert _state(panel_world) == before


def test_the_page_is_in_the_readers_language_and_quotes_no_control_character(
    panel_world: PanelWorld,
) -> None:
    with _client(panel_world, "operator", headers={"Accept-Language": "de"}) as client:
        page = client.get("/panel/operator")
        before = _state(panel_world)
        answer = client.post(
            "/panel/operator/brake",
            data={"csrf": csrf_of(page.text), "engaged": "1", "reason": "\x1b[2J" + "y" * 2500},
        )
    assert answer.status_code == 422
    assert answer.headers["content-language"] == "de"
    [problem] = _text(answer.text, "form-refused")
    assert problem.startswith("Grund: „\ufffd[2J" + "y" * 36 + "…“")
    assert "2.504" in problem and "2.000" in problem
    assert "\x1b" not in answer.text
    # No Referer: the link leads to the form's page, found from the address the form was sent to.
    assert 'href="/panel/operator">' in answer.text
    assert _state(panel_world) == before


def test_a_key_too_long_to_sign_in_with_is_not_shown_back(panel_world: PanelWorld) -> None:
    with panel_world.client() as client:
        form = client.get("/panel/sign-in")
        answer = client.post(
            "/panel/sign-in",
            data={"csrf": csrf_of(form.text), "key": "nwp_" + "s" * 300},
            headers={"Referer": "https://elsewhere.example/panel/agents"},
        )
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert "sssssss" not in answer.text
    assert _text(answer.text, "form-refused") == [
        "Your panel key or operator key: too long (304 characters). At most 200 characters are"
        " accepted."
    ]
    # A Referer from another site is not followed: the link leads to the form's own page.
    assert 'href="/panel/sign-in">' in answer.text
    assert "elsewhere.example" not in answer.text


def test_the_api_still_answers_json(panel_world: PanelWorld) -> None:
    key = panel_world.server.create_operator_key()
    answer = httpx.put(
        f"{panel_world.server.base_url}/v1/admin/brake",
        json={"engaged": True, "reason": "x" * 600},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert answer.status_code == 422
    assert answer.json()["detail"]["code"] == "invalid_request"


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("   ", "Reason: only spaces. Say why the updates are held, in at most 500 characters."),
        (
            "audit\x1bweek",
            "Reason: “audit\ufffdweek” contains a control character (U+001B). Say why the updates"
            " are held, in plain text of at most 500 characters.",
        ),
        (
            "a" * 600,
            f"Reason: “{'a' * 40}…” is too long (600 characters). Say why the updates are held,"
            " in at most 500 characters.",
        ),
        # Over the 2,000 characters the other reasons of the operators' forms are bounded by:
        # still the message at its field, as the customer's hold form says it.
        (
            "b" * 2500,
            f"Reason: “{'b' * 40}…” is too long (2,500 characters). Say why the updates are held,"
            " in at most 500 characters.",
        ),
    ],
    ids=["only_spaces", "escape", "600_characters", "2500_characters"],
)
def test_the_operators_hold_says_what_is_wrong_with_its_reason(
    panel_world: PanelWorld, reason: str, message: str
) -> None:
    with _client(panel_world, "operator") as client:
        form = f"/panel/operator/orgs/{panel_world.org_id}/agents/{panel_world.agent_id}"
        page = client.get(form)
        before = _state(panel_world)
        answer = client.post(
            form,
            data={
                "csrf": csrf_of(page.text),
                "action": "hold",
                "until": "2027-04-02",
                "reason": reason,
            },
        )
    assert answer.status_code == 422
    for element_id in ("hold-reason-error", "error-summary"):
        inner = answer.text.split(f'id="{element_id}"', 1)[1].split(">", 1)[1]
        inner = inner.split("</p>", 1)[0]
        assert html.unescape(re.sub(r"<[^>]+>", "", inner)).strip() == message
    assert _state(panel_world) == before


def test_the_operators_forced_update_answers_a_long_reason_at_its_field(
    panel_world: PanelWorld,
) -> None:
    with _client(panel_world, "operator") as client:
        form = f"/panel/operator/orgs/{panel_world.org_id}/agents/{panel_world.agent_id}"
        page = client.get(form)
        before = _state(panel_world)
        answer = client.post(
            form, data={"csrf": csrf_of(page.text), "action": "force", "reason": "c" * 2500}
        )
    assert answer.status_code == 422
    assert 'id="form-refused"' not in answer.text
    inner = answer.text.split('id="force-reason-error"', 1)[1].split(">", 1)[1]
    assert inner.split("</p>", 1)[0].strip() == "Give a reason of at most 500 characters."
    assert _state(panel_world) == before


# (form's address, its fields): forms that need a session, each with a field over its bound.
SIGNED_IN_FORMS = [
    pytest.param(f"/panel/agents/{AGENT}/hold", {"until": "x" * 41}, id="customer_hold"),
    pytest.param("/panel/webhook", {"url": "https://a.example/" + "x" * 2100}, id="webhook"),
    pytest.param("/panel/operator/brake", {"engaged": "1", "reason": "r" * 2001}, id="brake"),
    pytest.param(
        f"/panel/operator/orgs/{ORG}/agents/{AGENT}",
        {"action": "pin", "version": "v" * 201, "reason": "audit"},
        id="operator_pin",
    ),
]


@pytest.mark.parametrize(("action", "fields"), SIGNED_IN_FORMS)
def test_a_post_without_a_session_is_sent_to_sign_in_whatever_its_fields(
    panel_world: PanelWorld, action: str, fields: dict[str, str]
) -> None:
    """Over-long or not, a form that needs a session gets the sign-in redirect without one, as
    every other post does; its fields are not read, nothing is stored."""
    ids = {"org": panel_world.org_id, "agent": panel_world.agent_id}
    action = action.format(**ids)
    before = _state(panel_world)
    with panel_world.client() as client:
        answer = client.post(action, data={"csrf": "x", **fields})
        assert (answer.status_code, answer.headers.get("location")) == (303, "/panel/sign-in")
        # A browser whose session ended is told so, as on every other post.
        client.cookies.set("nw_panel_session", "ended-long-ago")
        ended = client.post(action, data={"csrf": "x", **fields})
        assert (ended.status_code, ended.headers.get("location")) == (
            303,
            "/panel/sign-in?ended=1",
        )
        # The same post within its bounds: the same answer.
        within = {key: value[:20] for key, value in fields.items()}
        client.cookies.clear()
        plain = client.post(action, data={"csrf": "x", **within})
        assert (plain.status_code, plain.headers.get("location")) == (303, "/panel/sign-in")
    assert _state(panel_world) == before


def test_a_value_no_form_sends_is_named_too(panel_world: PanelWorld) -> None:
    """The schedule editor's "remove" button sends a row's number; anything else is named."""
    with _client(panel_world, "customer") as client:
        agent = f"/panel/agents/{panel_world.agent_id}"
        page = client.get(agent)
        before = _state(panel_world)
        answer = client.post(
            agent + "/schedule",
            data={"csrf": csrf_of(page.text), "enabled": "on", "times": "03:00", "remove": "x\x00"},
            headers={"Referer": str(page.url)},
        )
    assert answer.status_code == 422
    assert _text(answer.text, "form-refused") == [
        "remove: “x\ufffd” is not a value this form sends. Go back and use the form as the page"
        " shows it."
    ]
    assert f'href="{agent}"' in answer.text
    assert _state(panel_world) == before


@pytest.mark.slow
@pytest.mark.parametrize("code", ["en", "pl"])
def test_a_pasted_address_too_long_in_a_real_browser(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    """The webhook's address field has no `maxlength` (a URL's length is the server's to judge):
    a pasted one over the bound gets the page, checked with axe-core, and its link leads back."""
    lang = Language(code)
    page = new_page(BROWSER_LOCALES[code])
    page.goto(panel_world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.get_by_role("heading", name=lang.gettext("Agents"), exact=True).wait_for()
    page.goto(panel_world.url + "webhook")
    before = _state(panel_world)
    page.get_by_label(lang.gettext("Address (https://…)")).fill(
        "https://hooks.example/" + "a" * 2100
    )
    page.get_by_role("button", name=lang.gettext("Save the webhook")).click()
    page.get_by_role("heading", name=lang.gettext("The form was not sent")).wait_for()
    assert lang.gettext("Address") in page.locator("#form-refused").inner_text()
    check_accessibility(page)
    page.get_by_role("link", name=lang.gettext("Back to the form")).click()
    page.get_by_role("button", name=lang.gettext("Save the webhook")).wait_for()
    assert page.url.endswith("/panel/webhook")
    assert _state(panel_world) == before
