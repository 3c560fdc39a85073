"""The capacity forecast: per slot instant of a local day, the agents
scheduled, the capacity the caps allow inside the window and how many will miss it."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.forecast.model import WaveOutlook, fair_shares, forecast_slot
from control_plane.forecast.text import render_outlook
from control_plane.registry import Services
from control_plane.settings.services import PlatformSettings
from tests.conftest import REPO_ROOT, child_environment, nachtwacht_command
from tests.control_plane.conftest import Api, SignedRelease
from tests.control_plane.reconcile_fleet import NIGHT, NIGHT_KEY, Fleet


@pytest.mark.parametrize(
    ("agents_per_org", "can_update", "will_miss"),
    [
        pytest.param({f"org-{n}": 40 for n in range(100)}, 375, 3625, id="herd_4000_in_100"),
        pytest.param({"acme": 3}, 3, 0, id="small_org_fits"),
        pytest.param({"acme": 100}, 75, 25, id="one_big_org_hits_its_cap"),
        pytest.param({"acme": 75, "globex": 75}, 150, 0, id="two_orgs_at_their_caps"),
        pytest.param({f"org-{n}": 75 for n in range(5)}, 375, 0, id="exactly_the_global_cap"),
        pytest.param({f"org-{n}": 75 for n in range(6)}, 375, 75, id="one_org_too_many"),
        pytest.param({}, 0, 0, id="nobody"),
    ],
)
def test_forecast_of_one_slot_with_the_default_caps(
    agents_per_org: dict[str, int], can_update: int, will_miss: int
) -> None:
    slot = forecast_slot(agents_per_org, org_cap=5, global_cap=25, window_minutes=15)
    assert (slot.capacity, slot.org_capacity) == (375, 75)
    assert (slot.can_update, slot.will_miss) == (can_update, will_miss)


# No deadline: timing an example fails on a loaded machine, not on a wrong sum.
@settings(deadline=None)
@given(
    st.dictionaries(st.integers(0, 30), st.integers(0, 200), max_size=30),
    st.integers(0, 10),
    st.integers(0, 50),
    st.integers(1, 30),
)
def test_the_organisations_shares_add_up_to_the_platform_figure(
    agents: dict[int, int], org_cap: int, global_cap: int, window: int
) -> None:
    caps = {"org_cap": org_cap, "global_cap": global_cap, "window_minutes": window}
    platform = forecast_slot(agents, **caps)
    shares = fair_shares(agents, **caps)
    assert sum(share.can_update for share in shares.values()) == platform.can_update
    for org, share in shares.items():
        assert 0 <= share.can_update <= min(agents[org], org_cap * window)
        assert share.can_update + share.will_miss == agents[org]


def _small_fleet(fleet: Fleet) -> tuple[UUID, UUID]:
    """Acme: 100 agents at 03:00 (over its cap of 75), 2 at 13:30. Globex: 10 at 03:00, one off."""
    acme, globex = fleet.org("Acme"), fleet.org("Globex")
    for n in range(100):
        fleet.agent(acme, f"a-{n:03d}")
    for n in range(2):
        fleet.agent(acme, f"day-{n}", times=["13:30"])
    for n in range(10):
        fleet.agent(globex, f"g-{n:02d}")
    fleet.disable(fleet.agent(globex, "g-off"))
    return acme, globex


def test_the_platform_forecast_of_a_small_fleet(api: Api, fleet: Fleet, operator_key: str) -> None:
    _small_fleet(fleet)
    with api.client(operator_key) as client:
        view = client.get("/v1/admin/forecast", params={"date": "2026-12-01"}).json()
    assert (view["timezone"], view["catch_up_minutes"], view["org_cap"], view["global_cap"]) == (
        "Europe/Amsterdam",
        15,
        5,
        25,
    )
    night, day = view["slots"]
    assert night == {
        "key": "2026-12-01T03:00",
        "at": "2026-12-01T02:00:00Z",
        "local_time": "2026-12-01T03:00:00+01:00",
        "overlaps": [],
        "agents": 110,
        "organisations": 2,
        # 14 rounds: none is granted in the window's last minute (the grant margin).
        "capacity": 350,
        "org_capacity": 70,
        "can_update": 80,
        "will_miss": 30,
        "orgs_over_their_cap": 1,
    }
    assert (day["key"], day["agents"], day["will_miss"]) == ("2026-12-01T13:30", 2, 0)


def test_an_organisation_sees_only_its_own_forecast(api: Api, fleet: Fleet, make_org) -> None:
    _small_fleet(fleet)
    other = make_org("Initech")
    with api.client(other.panel_key) as client:
        view = client.get("/v1/forecast", params={"date": "2026-12-01"}).json()
    assert view["slots"] == []  # no agents of its own, and nothing of the others


def test_an_organisations_view_names_what_limits_it(
    api: Api, fleet: Fleet, services: Services
) -> None:
    acme, _ = _small_fleet(fleet)
    panel_key = services.accounts.create_panel_key(acme)
    with api.client(panel_key) as client:
        view = client.get("/v1/forecast", params={"date": "2026-12-01"}).json()
    night = view["slots"][0]
    assert (night["agents"], night["can_update"], night["will_miss"]) == (100, 70, 30)
    assert night["limited_by"] == "org_cap"
    assert "organisations" not in night and "capacity" not in night


def test_a_spring_forward_day_keeps_a_slot_in_the_skipped_hour(
    api: Api, fleet: Fleet, operator_key: str
) -> None:
    fleet.agent(fleet.org(), "web-01", times=["02:30"])
    with api.client(operator_key) as client:
        view = client.get("/v1/admin/forecast", params={"date": "2027-03-28"}).json()
    [slot] = view["slots"]
    assert (slot["key"], slot["local_time"]) == ("2027-03-28T02:30", "2027-03-28T03:30:00+02:00")


def test_overlapping_windows_are_named(api: Api, fleet: Fleet, operator_key: str) -> None:
    fleet.agent(fleet.org(), "web-01", times=["03:00", "03:10"])
    with api.client(operator_key) as client:
        view = client.get("/v1/admin/forecast", params={"date": "2026-12-01"}).json()
    assert [(s["key"], s["overlaps"]) for s in view["slots"]] == [
        ("2026-12-01T03:00", ["2026-12-01T03:10"]),
        ("2026-12-01T03:10", ["2026-12-01T03:00"]),
    ]


@pytest.mark.parametrize(
    "date",
    [
        pytest.param("2026-13-01", id="no_such_month"),
        pytest.param("30-11-2026", id="wrong_order"),
        pytest.param("2026-11-30T03:00", id="a_slot_key"),
        pytest.param("", id="empty"),
        pytest.param("20261130", id="basic_format"),
    ],
)
def test_a_bad_date_is_named(api: Api, operator_key: str, date: str) -> None:
    with api.client(operator_key) as client:
        response = client.get("/v1/admin/forecast", params={"date": date})
    assert response.status_code == 422
    assert response.json()["detail"]["message"] == (
        f"date: {date!r} is not a date (expected YYYY-MM-DD, e.g. 2026-11-30)"
    )


def test_the_forecast_is_for_operators_and_panels_only(api: Api, make_org, make_agent) -> None:
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    with api.client(org.panel_key) as client:
        assert client.get("/v1/admin/forecast", params={"date": "2026-12-01"}).status_code == 403
    with api.client(agent.agent_key) as client:
        assert client.get("/v1/forecast", params={"date": "2026-12-01"}).status_code == 403


def _control(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        nachtwacht_command("control", *args, "--database-url", database_url),
        env=child_environment(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_control_forecast_prints_the_table(fleet: Fleet, database_url: str) -> None:
    _small_fleet(fleet)
    result = _control(database_url, "forecast", "--date", "2026-12-01")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "forecast for 2026-12-01 (Europe/Amsterdam; window 15 min, caps 5 per organisation and"
        " 25 in total per minute)",
        "slot   local time      agents  orgs  capacity  per org  will miss",
        "03:00  03:00:00+01:00     110     2       350       70         30",
        "13:30  13:30:00+01:00       2     1       350       70          0",
        "30 agents will miss their window if all need an update",
    ]
    as_json = json.loads(
        _control(database_url, "forecast", "--date", "2026-12-01", "--json").stdout
    )
    assert [slot["will_miss"] for slot in as_json["slots"]] == [30, 0]


def test_control_forecast_refuses_a_bad_date_in_one_line(database_url: str) -> None:
    result = _control(database_url, "forecast", "--date", "tomorrow")
    assert result.returncode == 2
    assert result.stderr == (
        "nachtwacht control forecast: --date: 'tomorrow' is not a date"
        " (expected YYYY-MM-DD, e.g. 2026-11-30)\n"
    )


def test_the_forecast_agrees_with_a_herd_claiming_through_the_real_caps(
    api: Api, fleet: Fleet, services: Services, published: SignedRelease, operator_key: str
) -> None:
    """Four organisations of six agents, caps 2 per organisation and 5 in total, a 4-minute
    window whose last minute grants nothing (the grant margin): the forecast says 15 can update
    and 9 will miss; the claim endpoint, asked by every waiting agent every round, grants
    exactly 15, and the worker records the 9 misses as throttled."""
    del published
    services.settings.update({"org_cap": 2, "global_cap": 5, "catch_up_minutes": 4})
    keys = {}
    for org_name in ("a", "b", "c", "d"):
        org = services.accounts.create_org(org_name, now=fleet.clock.now())
        for n in range(6):
            keys[(n, org_name)] = services.accounts.enroll_agent(
                org.org_id, f"{org_name}{n}", now=fleet.clock.now()
            )
    with api.client(operator_key) as client:
        [slot] = client.get("/v1/admin/forecast", params={"date": "2026-11-30"}).json()["slots"]
    assert (slot["capacity"], slot["can_update"], slot["will_miss"]) == (15, 15, 9)

    waiting = sorted(keys)  # a0 b0 c0 d0 a1 …: every organisation asks in every round
    for minute in range(4):
        fleet.clock.set(NIGHT + timedelta(minutes=minute, seconds=10))
        for agent in list(waiting):
            with api.client(keys[agent].agent_key) as client:
                answer = client.post("/v1/agent/claims", json={"slot_key": NIGHT_KEY})
            assert answer.status_code in {201, 409, 429}, answer.text
            if answer.status_code == 201:
                waiting.remove(agent)
    assert len(keys) - len(waiting) == slot["can_update"]
    assert len(waiting) == slot["will_miss"]

    services.refusals.flush()
    fleet.reconcile(NIGHT + timedelta(minutes=4 + 2))
    assert sorted(fleet.missed().items()) == sorted(
        (f"{org}{n}", "throttled") for n, org in waiting
    )


def test_a_negative_fleet_is_refused_naming_the_organisation() -> None:
    with pytest.raises(ValueError, match=r"^agents_per_org\['acme'\]: -1 is negative"):
        forecast_slot({"acme": -1}, org_cap=5, global_cap=25, window_minutes=15)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            {},
            "stage canary, wave 1 of 4: the marked canaries and 5 % of the agents; 12 agents"
            " reached at their next slot, from 2026-12-01T03:00:00+01:00",
            id="canaries_tonight",
        ),
        pytest.param(
            {"can_update": 10, "will_miss": 2},
            "stage canary, wave 1 of 4: the marked canaries and 5 % of the agents; 12 agents"
            " reached at their next slot, from 2026-12-01T03:00:00+01:00\n"
            "the caps serve 10: 2 will miss it",
            id="over_the_caps",
        ),
        pytest.param(
            {"agents": 0, "can_update": 0, "first_slot_at": None, "first_slot_local_time": None},
            "stage canary, wave 1 of 4: the marked canaries and 5 % of the agents; no agent of"
            " this wave has a slot before 2026-12-01T15:00:00+00:00",
            id="nobody_in_the_day",
        ),
        pytest.param(
            {"agents": 1, "can_update": 1},
            "stage canary, wave 1 of 4: the marked canaries and 5 % of the agents; 1 agent"
            " reached at their next slot, from 2026-12-01T03:00:00+01:00",
            id="one_agent",
        ),
        pytest.param(
            {
                "agents": 0,
                "can_update": 0,
                "first_slot_at": None,
                "first_slot_local_time": None,
                "until": datetime(2026, 12, 1, 15, 0, 1, 649168, tzinfo=UTC),
            },
            "stage canary, wave 1 of 4: the marked canaries and 5 % of the agents; no agent of"
            " this wave has a slot before 2026-12-01T15:00:01+00:00",
            id="nobody_until_a_moment_with_microseconds",
        ),
    ],
)
def test_publishing_says_what_the_first_wave_reaches_and_when(
    changes: dict[str, object], expected: str
) -> None:
    outlook = WaveOutlook(
        stage="canary",
        wave=1,
        waves=4,
        share_percent=5,
        canaries=True,
        agents=12,
        can_update=12,
        will_miss=0,
        first_slot_at=datetime(2026, 12, 1, 2, 0, tzinfo=UTC),
        first_slot_local_time="2026-12-01T03:00:00+01:00",
        until=datetime(2026, 12, 1, 15, 0, tzinfo=UTC),
    )
    assert render_outlook(replace(outlook, **changes)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("catch_up_minutes", "grant_margin_seconds", "rounds"),
    [
        pytest.param(15, 60, 14, id="default_last_minute_grants_nothing"),
        pytest.param(15, 0, 15, id="no_margin"),
        pytest.param(15, 30, 15, id="the_last_round_grants_in_its_first_half"),
        pytest.param(15, 61, 14, id="a_second_into_the_fourteenth_round"),
        pytest.param(15, 899, 1, id="only_the_first_second"),
        pytest.param(2, 119, 1, id="short_window"),
    ],
)
def test_the_rounds_that_grant_are_those_begun_before_the_margin(
    catch_up_minutes: int, grant_margin_seconds: int, rounds: int
) -> None:
    settings = PlatformSettings(
        catch_up_minutes=catch_up_minutes, grant_margin_seconds=grant_margin_seconds
    )
    assert settings.grant_rounds == rounds
