"""Named operators: invited by an operator, they sign in as themselves with a password and TOTP,
land on the operators' pages (never a customer's), and the trail names them for what they do."""

from __future__ import annotations

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.people_support import set_password, sign_in_person


def test_a_named_operator_signs_in_and_the_trail_names_them(panel_world: PanelWorld) -> None:
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as operator:
        form = operator.get("/panel/operator/people")
        answer = operator.post(
            "/panel/operator/people",
            data={"csrf": csrf_of(form.text), "name": "Piet Bakker", "email": "piet@example.com"},
        )
        assert answer.status_code == 200, answer.text
        link = answer.text.split('id="invitation-link"><code>', 1)[1].split("<", 1)[0]
    with panel_world.client() as piet:
        assert set_password(piet, link).status_code == 303
        sign_in_person(piet, "piet@example.com")
        assert piet.get("/panel/").headers["location"] == "/panel/operator"
        overview = piet.get("/panel/operator")
        assert overview.status_code == 200
        assert piet.get("/panel/agents").status_code == 404
        braked = piet.post(
            "/panel/operator/brake",
            data={"csrf": csrf_of(overview.text), "engaged": "1", "reason": "maintenance"},
        )
        assert braked.status_code == 303, braked.text
    with panel_world.client(headers={"Authorization": f"Bearer {key}"}) as api:
        events = api.get("/v1/admin/events", params={"kind": "brake.engaged"}).json()["events"]
    assert [(e["actor"]["kind"], e["actor"]["name"]) for e in events] == [
        ("operator", "Piet Bakker")
    ]


def test_an_organisations_editor_cannot_invite_operators(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        form = editor.get("/panel/agents")
        answer = editor.post(
            "/panel/operator/people",
            data={"csrf": csrf_of(form.text), "name": "Eve", "email": "eve@example.com"},
        )
    assert answer.status_code == 404
