"""An object that does not exist for the reader, found missing only by a page's backend call (the
id is well formed and the form's token is right): every such page and form answers the same "not
found" page, in the reader's language, with the panel's headers, and the reader stays signed in."""

from __future__ import annotations

from uuid import uuid4

import httpx

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

UNKNOWN = str(uuid4())
CUSTOMER_PAGES = (f"/panel/agents/{UNKNOWN}",)
CUSTOMER_FORMS = (
    f"/panel/agents/{UNKNOWN}/update",
    f"/panel/agents/{UNKNOWN}/hold/end",
    f"/panel/enrollment/{UNKNOWN}/revoke",
    f"/panel/notifications/{UNKNOWN}/read",
    f"/panel/people/{UNKNOWN}/remove",
    f"/panel/people/{UNKNOWN}/reset",
)
OPERATOR_PAGES = (f"/panel/operator/credentials/{UNKNOWN}/revoke",)
OPERATOR_FORMS = (
    f"/panel/operator/credentials/{UNKNOWN}/revoke",
    f"/panel/operator/notices/{UNKNOWN}/read",
    f"/panel/operator/people/{UNKNOWN}/remove",
)


def _assert_not_found_in_german(answer: httpx.Response, path: str) -> None:
    assert answer.status_code == 404, (path, answer.status_code)
    assert "Nicht gefunden" in answer.text, path
    assert answer.headers["content-language"] == "de", path
    assert answer.headers["x-frame-options"] == "DENY", path


def _walk(client: httpx.Client, home: str, pages: tuple[str, ...], forms: tuple[str, ...]) -> None:
    token = csrf_of(client.get(home).text)
    for path in pages:
        _assert_not_found_in_german(client.get(path), path)
    for path in forms:
        _assert_not_found_in_german(client.post(path, data={"csrf": token}), path)
    # Still signed in: a missing object is not a reason to end the session.
    assert client.get(home).status_code == 200


def test_a_missing_object_is_the_not_found_page_for_a_customer(panel_world: PanelWorld) -> None:
    german = {"accept-language": "de"}
    with sign_in_client(panel_world, panel_world.panel_key, headers=german) as client:
        _walk(client, "/panel/people", CUSTOMER_PAGES, CUSTOMER_FORMS)


def test_a_missing_object_is_the_not_found_page_for_an_operator(panel_world: PanelWorld) -> None:
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key, headers={"accept-language": "de"}) as client:
        _walk(client, "/panel/operator/people", OPERATOR_PAGES, OPERATOR_FORMS)
