"""An organisation id that names no organisation is one answer wherever a call takes one: a 404
`org_not_found` naming the id, and nothing written."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import pytest

from control_plane.accounts.credentials import Audience
from control_plane.enrollment.rules import TokenTerms
from control_plane.errors import NotFound
from control_plane.events.services import EventFilter
from control_plane.events.trail import Actor
from control_plane.registry import Services
from tests.worlds.clocks import ManualClock

UNKNOWN = UUID("00000000-0000-4000-8000-0000000000aa")
OPERATOR = Actor(kind="operator")

CALLS: dict[str, Callable[[Services, ManualClock], object]] = {
    "panel_credential": lambda s, c: s.accounts.issue(
        Audience.PANEL, name="desk", org_id=UNKNOWN, now=c.now(), actor=OPERATOR
    ),
    "enroll_agent": lambda s, c: s.accounts.enroll_agent(UNKNOWN, "web-1", now=c.now()),
    "enrollment_token": lambda s, c: s.enrollment.create(
        UNKNOWN, TokenTerms(), now=c.now(), actor=OPERATOR
    ),
    "org_pin": lambda s, c: s.pins.pin(
        org_id=UNKNOWN, version="1.0.0", reason="audit", actor=OPERATOR, now=c.now()
    ),
    "canary_org": lambda s, c: s.rollout.mark_canary_org(
        UNKNOWN, canary=True, actor=OPERATOR, now=c.now()
    ),
    "org_agent_releases": lambda s, c: s.rollout.org_agent_releases(UNKNOWN, now=c.now()),
    "default_schedule": lambda s, c: s.agents.default_schedule(UNKNOWN),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_an_unknown_organisation_is_not_found_by_its_id(
    services: Services, clock: ManualClock, call: str
) -> None:
    with pytest.raises(NotFound) as refused:
        CALLS[call](services, clock)
    assert refused.value.code == "org_not_found"
    assert refused.value.message == f"organisation {UNKNOWN} does not exist"
    assert services.events.trail(EventFilter()).events == ()
