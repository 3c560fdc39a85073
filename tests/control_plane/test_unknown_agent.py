"""An agent id that names no live agent is one answer wherever a call takes one without an
organisation (an operator's, or the agent's own): a 404 `agent_not_found` naming the id, and
nothing written. Within an organisation (a customer's call) the answer says so."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from uuid import UUID

import pytest

from control_plane.errors import NotFound
from control_plane.events.services import EventFilter
from control_plane.events.trail import Actor
from control_plane.registry import Services
from ground.contract import DEFAULT_TRACK
from tests.control_plane.conftest import Org
from tests.worlds.clocks import ManualClock

UNKNOWN = UUID("00000000-0000-4000-8000-0000000000bb")
OPERATOR = Actor(kind="operator")

CALLS: dict[str, Callable[[Services, ManualClock], object]] = {
    "agent_pin": lambda s, c: s.pins.pin(
        agent_id=UNKNOWN, version="1.0.0", reason="audit", actor=OPERATOR, now=c.now()
    ),
    "hold": lambda s, c: s.pins.hold(
        UNKNOWN,
        org_id=None,
        until=c.now() + timedelta(days=2),
        reason="audit",
        set_by="operator",
        actor=OPERATOR,
        now=c.now(),
    ),
    "release_hold": lambda s, c: s.pins.release_hold(
        UNKNOWN, org_id=None, actor=OPERATOR, now=c.now()
    ),
    "agent_release": lambda s, c: s.rollout.agent_release(UNKNOWN, org_id=None, now=c.now()),
    "force_update": lambda s, c: s.rollout.force_update(
        UNKNOWN, reason="urgent fix", actor=OPERATOR, now=c.now()
    ),
    "canary": lambda s, c: s.rollout.mark_canary(UNKNOWN, canary=True, actor=OPERATOR, now=c.now()),
    "config": lambda s, c: s.agent_config.config(UNKNOWN, DEFAULT_TRACK, c.now()),
    "claim": lambda s, c: s.claims.claim_slot(UNKNOWN, "2026-11-30T02:00", None, c.now()),
    "up_to_date": lambda s, c: s.runs.record_up_to_date(
        UNKNOWN, "2026-11-30T02:00", "1.0.0", c.now()
    ),
    "release_retry": lambda s, c: s.runs.request_release_retry(
        UNKNOWN, actor=OPERATOR, now=c.now()
    ),
    "runs": lambda s, c: s.runs.any_agent_runs(UNKNOWN),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_an_unknown_agent_is_not_found_by_its_id(
    services: Services, clock: ManualClock, call: str
) -> None:
    with pytest.raises(NotFound) as refused:
        CALLS[call](services, clock)
    assert refused.value.code == "agent_not_found"
    assert refused.value.message == f"agent {UNKNOWN} does not exist"
    assert services.events.trail(EventFilter()).events == ()


def test_within_an_organisation_the_answer_names_it(
    services: Services, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    org = UUID(make_org("Acme").org_id)
    before = services.events.trail(EventFilter()).events
    with pytest.raises(NotFound) as refused:
        services.pins.release_hold(UNKNOWN, org_id=org, actor=OPERATOR, now=clock.now())
    assert refused.value.code == "agent_not_found"
    assert refused.value.message == f"agent {UNKNOWN} does not exist in this organisation"
    assert services.events.trail(EventFilter()).events == before
