"""An address a person types — an organisation's webhook URL, its OpenID issuer — is shown on the
panel and kept on the trail like a name: a control character (an escape sequence) or a
bidirectional control in it is refused naming the field and the character, and nothing is
stored. Through the API (the webhook) and the services the panel calls (both)."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import pytest

from control_plane.errors import InvalidInput
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.conftest import Api, Org, table_rows
from tests.worlds.clocks import ManualClock

WATCHED = ("webhooks", "oidc_providers", "events")
# A public address: allowed by the default policy without resolving a name.
BASE = "https://93.184.216.34/hooks/"
HOSTILE = [
    pytest.param(BASE + "\u202egpj.exe", "the bidirectional control U+202E", id="override"),
    pytest.param(BASE + "a\u2066b", "the bidirectional control U+2066", id="isolate"),
    pytest.param(BASE + "a\x1b[2Jb", "the control character U+001B", id="escape"),
    pytest.param(BASE + "a\x9bb", "the control character U+009B", id="c1"),
]


@pytest.mark.parametrize(("url", "named"), HOSTILE)
def test_a_webhook_url_with_a_control_is_a_422_naming_it(
    api: Api, pool: Pool, make_org: Callable[[str], Org], url: str, named: str
) -> None:
    org = make_org("Acme")
    before = table_rows(pool, WATCHED)
    with api.client(org.panel_key) as client:
        answer = client.put("/v1/webhook", json={"url": url})
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail["field"] == "url"
    assert named in detail["message"], detail["message"]
    assert table_rows(pool, WATCHED) == before


@pytest.mark.parametrize(("url", "named"), HOSTILE)
def test_an_issuer_with_a_control_is_refused_naming_it(
    services: Services,
    pool: Pool,
    clock: ManualClock,
    make_org: Callable[[str], Org],
    url: str,
    named: str,
) -> None:
    org = make_org("Acme")
    before = table_rows(pool, WATCHED)
    with pytest.raises(InvalidInput) as refused:
        services.oidc.put(
            UUID(org.org_id),
            issuer=url,
            client_id="nachtwacht",
            client_secret="s3cret",
            now=clock.now(),
            actor=Actor(kind="user", name="first panel key"),
        )
    assert str(refused.value).startswith("issuer: "), refused.value
    assert named in str(refused.value)
    assert table_rows(pool, WATCHED) == before
