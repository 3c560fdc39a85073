"""`GET /v1/forecast` is one organisation's view (issue 12): another organisation's schedule —
its times, its slots, its overlaps — is not in it. Only the platform's total at a slot this
organisation shares weighs in its estimated share, as a number."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.conftest import Api, Org
from tests.control_plane.reconcile_fleet import Fleet
from tests.worlds.clocks import ManualClock

DAY = "2026-12-01"


@pytest.fixture
def fleet(pool: Pool, services: Services, clock: ManualClock) -> Iterator[Fleet]:
    made = Fleet(pool, services, clock)
    yield made
    made.close()


def _forecast(api: Api, org: Org) -> dict[str, Any]:
    with api.client(org.panel_key) as client:
        response = client.get("/v1/forecast", params={"date": DAY})
    assert response.status_code == 200
    view: dict[str, Any] = response.json()
    return view


def _agents(fleet: Fleet, org: Org, times: list[str], count: int, prefix: str) -> None:
    for n in range(count):
        fleet.agent(org.org_id, f"{prefix}-{n:02d}", times=times)  # type: ignore[arg-type]


def test_another_organisations_overlapping_slot_is_not_named(
    api: Api, fleet: Fleet, make_org: Callable[..., Org]
) -> None:
    acme, rival = make_org("Acme"), make_org("Rival")
    _agents(fleet, acme, ["03:00"], 2, "acme")
    alone = _forecast(api, acme)
    # Rival schedules 03:05 and 04:35: inside Acme's 03:00 window, and a time of its own.
    _agents(fleet, rival, ["03:05", "04:35"], 3, "rival")
    beside = _forecast(api, acme)
    assert [slot["key"] for slot in beside["slots"]] == ["2026-12-01T03:00"]
    assert beside["slots"][0]["overlaps"] == []
    assert "03:05" not in str(beside) and "04:35" not in str(beside)
    assert beside == alone


def test_a_slot_shared_with_another_organisation_shows_only_own_figures(
    api: Api, fleet: Fleet, make_org: Callable[..., Org]
) -> None:
    acme, rival = make_org("Acme"), make_org("Rival")
    _agents(fleet, acme, ["03:00"], 2, "acme")
    _agents(fleet, rival, ["03:00"], 7, "rival")
    [slot] = _forecast(api, acme)["slots"]
    assert slot["agents"] == 2
    assert "organisations" not in slot and "orgs_over_their_cap" not in slot
    assert str(rival.org_id) not in str(slot)


def test_an_organisation_without_agents_sees_no_slot_of_others(
    api: Api, fleet: Fleet, make_org: Callable[..., Org]
) -> None:
    acme, rival = make_org("Acme"), make_org("Rival")
    _agents(fleet, rival, ["03:00", "13:30"], 2, "rival")
    assert _forecast(api, acme)["slots"] == []
