"""A form that shows a secret once, sent twice at the same moment (a double click whose second
sending leaves before the first answer came back): exactly one secret is made, one answer shows
it and the other says the form was sent already; the secret shown stays valid."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.panel.conftest import PanelWorld, csrf_of
from tests.panel.test_secret_forms_once_http import (
    FORMS,
    _first_secret_still_works,
    once_of,
    rows,
    signed_in,
)


def _two_at_once(
    world: PanelWorld, client: httpx.Client, action: str, data: dict[str, str]
) -> list[httpx.Response | BaseException]:
    """Both sendings from one browser session, released together; neither saw the other's
    answer (nor a cookie it set)."""
    start = threading.Barrier(2)
    answers: list[httpx.Response | BaseException] = [ValueError("not sent")] * 2

    def send(index: int) -> None:
        with world.client(cookies=dict(client.cookies.items())) as own:
            start.wait(timeout=30)
            try:
                answers[index] = own.post(action, data=data)
            except httpx.HTTPError as exc:  # said by the assertions below
                answers[index] = exc

    threads = [threading.Thread(target=send, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


@pytest.mark.parametrize("name", sorted(FORMS))
def test_two_sendings_at_once_make_one_secret(panel_world: PanelWorld, name: str) -> None:
    world = panel_world
    who = "operator" if name in {"issue_key", "rotate_key", "operator_invitation"} else "customer"
    with signed_in(world, who) as client:
        form = FORMS[name](world, client)
        shown_page = client.get(form.page)
        data = {"csrf": csrf_of(shown_page.text), "once": once_of(shown_page.text), **form.fields}
        before = rows(world)

        answers = _two_at_once(world, client, form.action, data)

        statuses = sorted(
            answer.status_code if isinstance(answer, httpx.Response) else repr(answer)
            for answer in answers
        )
        assert statuses == [200, 409], statuses
        shown = [a for a in answers if isinstance(a, httpx.Response) and a.status_code == 200]
        again = [a for a in answers if isinstance(a, httpx.Response) and a.status_code == 409]
        secret = form.secret.search(shown[0].text)
        assert secret is not None, shown[0].text
        assert 'id="sent-again"' in again[0].text
        assert form.secret.search(again[0].text) is None
        after = rows(world)
    # One make: a table grew by one row at most (a second key, token or person is a second
    # make); a second link or webhook secret would have ended the one shown, checked below.
    for table in ("credentials", "enrollment_tokens", "people"):
        assert len(after[table]) - len(before[table]) <= 1, table
    _first_secret_still_works(world, name, secret.group(1))
