"""The people page refusing what an editor sends, in each of the nine languages: a name or an
address holding a control character, an address that is not one, a role the form has no choice
for. Each refusal names its field and the value (its controls shown, not obeyed) and what is
expected, and nothing is stored."""

from __future__ import annotations

import html
import re

import psycopg
import pytest

from control_plane.panel.form_refusal import not_an_address, not_plain, not_sent_by_form
from control_plane.panel.i18n import LANGUAGES, Language
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.people_support import invite
from tests.worlds.rows import rows_at

_TABLES = ("people", "events", "panel_sessions")
_FIELD_ERROR = re.compile(r'class="field-error" id="(\w+)-error">([^<]*)<')
_PERSON_ERROR = re.compile(r'id="person-error">([^<]*)<')


def _rows(world: PanelWorld) -> dict[str, list[str]]:
    return rows_at(world.server.database_url, _TABLES)


def _said(text: str) -> str:
    return html.unescape(text)


@pytest.mark.parametrize("code", LANGUAGES)
def test_an_invitation_refused_says_the_field_and_the_value(
    panel_world: PanelWorld, code: str
) -> None:
    lang = Language(code)
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": code}
    ) as client:
        token = csrf_of(client.get("/panel/people").text)
        before = _rows(panel_world)
        cases = [
            ("name", {"name": "\u202eevil.exe", "email": "a@acme.example", "role": "viewer"}),
            ("name", {"name": "B\x07o", "email": "b@acme.example", "role": "viewer"}),
            ("email", {"name": "Bo", "email": "bo at acme", "role": "viewer"}),
            ("email", {"name": "Bo", "email": "bo@acme.example\u2066", "role": "viewer"}),
            ("role", {"name": "Bo", "email": "c@acme.example", "role": "owner"}),
            ("role", {"name": "Bo", "email": "d@acme.example", "role": "operator"}),
        ]
        for field, fields in cases:
            answer = client.post("/panel/people", data={"csrf": token, **fields})
            assert answer.status_code == 422, answer.text
            errors = dict(_FIELD_ERROR.findall(answer.text))
            assert list(errors) == [field], (fields, errors)
            value = fields[field]
            if field == "role":
                expected = not_sent_by_form(lang, "role", value)
                assert value in _said(errors[field])
            elif field == "email" and "@" not in value:
                expected = not_an_address(lang, value)
                assert value in _said(errors[field])
            else:
                expected = str(not_plain(lang, field, value))
                control = next(c for c in value if c in "\u202e\x07\u2066")
                assert f"U+{ord(control):04X}" in errors[field]
            assert _said(errors[field]) == expected
        assert _rows(panel_world) == before


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_role_the_form_has_no_choice_for_is_said(panel_world: PanelWorld, code: str) -> None:
    lang = Language(code)
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": code}
    ) as client:
        invite(client, "Bo", "bo@acme.example", "viewer")
        with psycopg.connect(panel_world.server.database_url) as conn:
            found = conn.execute("SELECT id FROM people").fetchone()
        assert found is not None
        token = csrf_of(client.get("/panel/people").text)
        before = _rows(panel_world)
        for role in ("owner", "", "Editor", "editor\u202e", "operator"):
            answer = client.post(
                f"/panel/people/{found[0]}/role", data={"csrf": token, "role": role}
            )
            assert answer.status_code == 422
            said = _PERSON_ERROR.findall(answer.text)
            assert [_said(text) for text in said] == [not_sent_by_form(lang, "role", role)]
        assert _rows(panel_world) == before


def test_a_refused_provider_address_is_quoted_with_its_controls_shown(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/people").text)
        before = _rows(panel_world)
        answer = client.post(
            "/panel/people/oidc",
            data={
                "csrf": token,
                "issuer": "http://127.0.0.1/\u202eredivorp",
                "client_id": "nachtwacht",
                "client_secret": "s" * 20,
            },
        )
        assert answer.status_code == 422
        said = re.search(r'id="issuer-error">([^<]*)<', answer.text)
        assert said is not None
        assert "http://127.0.0.1/\ufffdredivorp" in said.group(1)
        assert "\u202e" not in said.group(1)
        assert _rows(panel_world) == before
