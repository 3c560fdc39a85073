"""An agent that tried through a slot's window and could not reach the control plane says so once
it can (`POST /v1/agent/unreachable`): the slot's miss reads `unreachable` with the agent's error,
whether the report comes before the missed pass or after it. It replaces `offline` only; an agent
that reports nothing stays `offline`; hostile reports change nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from control_plane.reconcile.data import SlotCandidate, insert_missed
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import UNREACHABLE_PATH, format_instant
from ground.limits import MAX_UNREACHABLE_REPORT_AGE_DAYS
from tests.control_plane.conftest import Agent, Api
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, NIGHT, NIGHT_KEY, Fleet
from tests.worlds.clocks import ManualClock

ERROR = "GET /v1/agent/config: cannot connect ([Errno 111] Connection refused)"


@pytest.fixture
def fleet(pool: Pool, services: Services, clock: ManualClock) -> Iterator[Fleet]:
    made = Fleet(pool, services, clock)
    yield made
    made.close()


@pytest.fixture
def agent(make_org, make_agent) -> Agent:
    made: Agent = make_agent(make_org("Acme"), "web-01")
    return made


def _body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "slot_key": NIGHT_KEY,
        "error": ERROR,
        "first_tried_at": format_instant(NIGHT + timedelta(minutes=1)),
        "last_tried_at": format_instant(NIGHT + timedelta(minutes=14)),
        "attempts": 14,
    }
    body.update(changes)
    return body


def _report(api: Api, agent: Agent, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    with api.client(agent.agent_key) as client:
        # JSON in ASCII, as an agent's encoder writes it: a lone surrogate goes as its escape.
        answer = client.post(
            UNREACHABLE_PATH,
            content=json.dumps(body).encode("ascii"),
            headers={"Content-Type": "application/json"},
        )
    return answer.status_code, answer.json()


def _miss(fleet: Fleet, agent: Agent) -> dict[str, Any]:
    """What the customer reads of the slot: the run's reason and error, the event's data."""
    run = fleet.one(
        "SELECT id, miss_reason, error FROM runs WHERE agent_id = %s AND slot_key = %s",
        [agent.agent_id, NIGHT_KEY],
    )
    event = fleet.one(
        "SELECT data FROM events WHERE run_id = %s AND kind = 'update.missed'", [run["id"]]
    )
    return {"reason": run["miss_reason"], "error": run["error"], "event": event["data"]}


UNREACHABLE_MISS = {
    "reason": "unreachable",
    "error": ERROR,
    "event": {"slot_key": NIGHT_KEY, "reason": "unreachable", "unreachable_error": ERROR},
}
OFFLINE_MISS = {
    "reason": "offline",
    "error": None,
    "event": {"slot_key": NIGHT_KEY, "reason": "offline"},
}


def test_a_report_after_the_missed_pass_corrects_the_offline_miss(
    api: Api, fleet: Fleet, agent: Agent
) -> None:
    fleet.reconcile(AFTER_NIGHT)
    assert _miss(fleet, agent) == OFFLINE_MISS
    fleet.clock.set(AFTER_NIGHT + timedelta(hours=2))
    status, answer = _report(api, agent, _body())
    assert status == 200
    assert answer["result"] == "corrected"
    assert _miss(fleet, agent) == UNREACHABLE_MISS


@pytest.mark.parametrize("reported_at", [NIGHT + timedelta(minutes=10), AFTER_NIGHT])
def test_a_report_before_the_missed_pass_ends_the_same(
    api: Api, fleet: Fleet, agent: Agent, reported_at: datetime
) -> None:
    # Inside the window (the way came back before it closed, and the agent then did not get its
    # update in), or after it closed but before the pass.
    fleet.clock.set(reported_at)
    status, answer = _report(api, agent, _body(last_tried_at=format_instant(reported_at)))
    assert (status, answer["result"]) == (200, "recorded")
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=1))
    assert _miss(fleet, agent) == UNREACHABLE_MISS


def test_an_agent_that_reports_nothing_stays_offline_and_another_agent_changes_nothing(
    api: Api, fleet: Fleet, agent: Agent, make_agent, make_org
) -> None:
    silent = make_agent(make_org("Other"), "db-01")
    fleet.clock.set(AFTER_NIGHT)
    assert _report(api, agent, _body())[1]["result"] == "recorded"
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=1))
    assert _miss(fleet, agent) == UNREACHABLE_MISS
    assert _miss(fleet, silent) == OFFLINE_MISS


def test_a_slot_that_ran_is_unchanged(api: Api, fleet: Fleet, agent: Agent) -> None:
    fleet.run(fleet_agent(fleet, agent), "succeeded", version="1.0.0")
    fleet.clock.set(AFTER_NIGHT)
    status, answer = _report(api, agent, _body())
    assert (status, answer["result"]) == (200, "unchanged")
    assert "succeeded" in answer["message"]
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=1))
    assert fleet.missed() == {}


def test_a_repeated_report_keeps_the_first(api: Api, fleet: Fleet, agent: Agent) -> None:
    fleet.reconcile(AFTER_NIGHT)
    assert _report(api, agent, _body())[1]["result"] == "corrected"
    status, answer = _report(api, agent, _body(error="something else entirely"))
    assert (status, answer["result"]) == (200, "unchanged")
    assert "reported before" in answer["message"]
    assert _miss(fleet, agent) == UNREACHABLE_MISS


def test_the_platform_unavailable_keeps_its_reason(api: Api, fleet: Fleet, agent: Agent) -> None:
    # Our own outage through the window comes first: the agent could not have reached us either.
    fleet.sql(
        "INSERT INTO platform_liveness (replica, started_at, last_mark_at, allowed_gap) VALUES"
        " ('r1', %s, %s, interval '1 minute'), ('r1', %s, %s, interval '1 minute')",
        [
            NIGHT - timedelta(hours=2),
            NIGHT - timedelta(hours=1),
            AFTER_NIGHT,
            AFTER_NIGHT,
        ],
    )
    fleet.clock.set(AFTER_NIGHT)
    assert _report(api, agent, _body())[1]["result"] == "recorded"
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=1))
    assert fleet.missed() == {"web-01": "platform_unavailable"}
    assert _report(api, agent, _body())[1]["result"] == "unchanged"
    assert fleet.missed() == {"web-01": "platform_unavailable"}


def test_an_agent_seen_in_the_window_keeps_its_reason(api: Api, fleet: Fleet, agent: Agent) -> None:
    # It polled in the window (the way came back), so it was not "not seen": unreachable replaces
    # offline only; the pass says what it says of an agent seen.
    fleet.clock.set(NIGHT + timedelta(minutes=12))
    with api.client(agent.agent_key) as client:
        assert client.get("/v1/agent/config").status_code == 200
    assert _report(api, agent, _body(last_tried_at=format_instant(NIGHT + timedelta(minutes=11))))[
        1
    ]["result"] == ("recorded")
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown"}


def test_a_report_during_the_missed_pass_waits_for_it_and_corrects_its_miss(
    api: Api, fleet: Fleet, agent: Agent, pool: Pool
) -> None:
    # The pass has read the slot (no report yet) and is writing `offline` when the report comes:
    # the report waits for the pass's transaction, then finds the miss and corrects it. Without
    # the lock it would find no run, be kept as `recorded`, and the miss would stay offline.
    fleet.clock.set(AFTER_NIGHT)
    candidate = SlotCandidate(
        agent_id=UUID(agent.agent_id),
        org_id=UUID(agent.org_id),
        slot_key=NIGHT_KEY,
        slot_at=NIGHT,
        window_closes=NIGHT + timedelta(minutes=15),
    )
    answers: list[tuple[int, dict[str, Any]]] = []
    reporter = threading.Thread(target=lambda: answers.append(_report(api, agent, _body())))
    with pool.connection() as conn, conn.transaction():
        assert [m.reason for m in insert_missed(conn, [candidate], now=AFTER_NIGHT)] == ["offline"]
        reporter.start()
        reporter.join(timeout=2)
        assert reporter.is_alive(), "the report did not wait for the pass"
    reporter.join(timeout=30)
    assert [(status, answer["result"]) for status, answer in answers] == [(200, "corrected")]
    assert _miss(fleet, agent) == UNREACHABLE_MISS


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"slot_key": "2026-12-01T03:00"}, "slot_key", id="future"),
        pytest.param({"slot_key": "2026-11-20T03:00"}, "slot_key", id="far_past"),
        pytest.param({"slot_key": "2019-11-30T03:00"}, "slot_key", id="years_past"),
        pytest.param({"slot_key": "0001-01-01T03:00"}, "slot_key", id="year_one"),
        pytest.param({"slot_key": "9999-12-31T03:00"}, "slot_key", id="year_9999"),
        pytest.param({"slot_key": "2026-11-30T24:00"}, "slot_key", id="no_such_time"),
        pytest.param({"slot_key": "2026-11-31T03:00"}, "slot_key", id="no_such_day"),
        pytest.param({"slot_key": "2026-11-30T03:00\n"}, "slot_key", id="trailing_newline"),
        pytest.param({"slot_key": "2026-11-30T03:05"}, "slot_key", id="not_its_slot"),
        pytest.param({"slot_key": "30/11/2026 03:00"}, "slot_key", id="not_a_key"),
        pytest.param({"slot_key": "x" * 10_000}, "slot_key", id="absurd_key"),
        pytest.param(
            {"first_tried_at": format_instant(NIGHT - timedelta(hours=3))},
            "first_tried_at",
            id="tried_before_the_window",
        ),
        pytest.param(
            {"last_tried_at": format_instant(NIGHT + timedelta(hours=3))},
            "last_tried_at",
            id="tried_after_the_window",
        ),
        pytest.param(
            {"last_tried_at": format_instant(NIGHT)}, "last_tried_at", id="last_before_first"
        ),
        pytest.param({"error": "x" * 501}, "error", id="huge_error"),
        pytest.param({"error": "   "}, "error", id="blank_error"),
        pytest.param({"attempts": 0}, "attempts", id="no_attempt"),
        pytest.param({"attempts": "3"}, "attempts", id="attempts_as_text"),
        pytest.param({"agent_id": "00000000-0000-0000-0000-000000000000"}, "agent_id", id="extra"),
    ],
)
def test_a_hostile_report_is_refused_naming_the_field_and_changes_nothing(
    api: Api, fleet: Fleet, agent: Agent, changes: dict[str, Any], field: str
) -> None:
    fleet.reconcile(AFTER_NIGHT)
    fleet.clock.set(AFTER_NIGHT + timedelta(minutes=5))
    events = fleet.rows("SELECT id, data FROM events ORDER BY id")
    status, answer = _report(api, agent, _body(**changes))
    assert status == 422, answer
    assert field in str(answer), answer
    assert fleet.rows("SELECT 1 FROM unreachable_reports") == []
    assert _miss(fleet, agent) == OFFLINE_MISS
    assert fleet.rows("SELECT id, data FROM events ORDER BY id") == events


@pytest.mark.parametrize("enrolled_after", [timedelta(minutes=15), timedelta(minutes=16)])
def test_a_slot_closed_before_the_agent_was_enrolled_is_refused_naming_the_enrollment(
    api: Api, fleet: Fleet, agent: Agent, enrolled_after: timedelta
) -> None:
    # Enrolled once the slot's window had closed: the missed pass never counts the slot as the
    # agent's (`claims.slots.agents_slot`), so a report of it could only be invented.
    enrolled = NIGHT + enrolled_after
    fleet.sql("UPDATE agents SET created_at = %s WHERE id = %s", [enrolled, agent.agent_id])
    fleet.reconcile(AFTER_NIGHT)
    fleet.clock.set(AFTER_NIGHT + timedelta(minutes=5))
    runs = fleet.rows("SELECT id, status FROM runs ORDER BY id")
    events = fleet.rows("SELECT id, data FROM events ORDER BY id")
    status, answer = _report(api, agent, _body())
    assert status == 422, answer
    message = answer["detail"]["message"]
    assert message.startswith(f"slot_key: '{NIGHT_KEY}'"), message
    assert format_instant(enrolled) in message and "enrolled" in message, message
    assert fleet.rows("SELECT 1 FROM unreachable_reports") == []
    assert fleet.rows("SELECT id, status FROM runs ORDER BY id") == runs
    assert fleet.rows("SELECT id, data FROM events ORDER BY id") == events


@pytest.mark.parametrize("enrolled_after", [timedelta(seconds=1), timedelta(minutes=10)])
def test_a_slot_under_way_at_enrollment_is_the_agents_and_its_miss_corrected(
    api: Api, fleet: Fleet, agent: Agent, enrolled_after: timedelta
) -> None:
    # Enrolled inside the slot's window: the claim could take it, so it is the agent's and its
    # miss is counted; the agent's report that it could not reach us corrects it.
    fleet.sql(
        "UPDATE agents SET created_at = %s WHERE id = %s", [NIGHT + enrolled_after, agent.agent_id]
    )
    fleet.reconcile(AFTER_NIGHT)
    assert _miss(fleet, agent) == OFFLINE_MISS
    fleet.clock.set(AFTER_NIGHT + timedelta(minutes=5))
    status, answer = _report(api, agent, _body())
    assert status == 200, answer
    assert _miss(fleet, agent) == UNREACHABLE_MISS


def _schedule(fleet: Fleet, agent: Agent, *, enabled: bool = True, times: str = "04:00") -> None:
    """The agent's schedule changed since the night (by the customer or an operator)."""
    fleet.sql(
        "UPDATE agents SET update_schedule_enabled = %s,"
        " update_schedule_times = jsonb_build_array(%s::text) WHERE id = %s",
        [enabled, times, agent.agent_id],
    )


@pytest.mark.parametrize("enabled", [True, False], ids=["times_changed", "switched_off"])
def test_a_miss_on_record_is_corrected_though_the_schedule_changed_since(
    api: Api, fleet: Fleet, agent: Agent, enabled: bool
) -> None:
    fleet.reconcile(AFTER_NIGHT)
    assert _miss(fleet, agent) == OFFLINE_MISS
    _schedule(fleet, agent, enabled=enabled)
    fleet.clock.set(AFTER_NIGHT + timedelta(hours=2))
    status, answer = _report(api, agent, _body())
    assert (status, answer["result"]) == (200, "corrected"), answer
    assert _miss(fleet, agent) == UNREACHABLE_MISS


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        # In the old schedule, but no miss of it on record (the pass never saw it missed).
        pytest.param({"slot_key": "2026-11-29T03:00"}, "slot_key", id="old_slot_not_on_record"),
        pytest.param({"slot_key": "2026-11-30T03:05"}, "slot_key", id="never_a_slot"),
        # On record, but the tries lie outside the recorded slot's window.
        pytest.param(
            {"first_tried_at": format_instant(NIGHT - timedelta(hours=3))},
            "first_tried_at",
            id="tried_before_the_recorded_window",
        ),
        pytest.param(
            {"last_tried_at": format_instant(NIGHT + timedelta(hours=3))},
            "last_tried_at",
            id="tried_after_the_recorded_window",
        ),
    ],
)
@pytest.mark.parametrize("enabled", [True, False], ids=["times_changed", "switched_off"])
def test_after_a_schedule_change_a_slot_neither_scheduled_nor_on_record_is_refused(
    api: Api, fleet: Fleet, agent: Agent, changes: dict[str, Any], field: str, enabled: bool
) -> None:
    fleet.reconcile(AFTER_NIGHT)
    _schedule(fleet, agent, enabled=enabled)
    fleet.clock.set(AFTER_NIGHT + timedelta(minutes=5))
    events = fleet.rows("SELECT id, data FROM events ORDER BY id")
    status, answer = _report(api, agent, _body(**changes))
    assert status == 422, answer
    assert field in str(answer), answer
    assert fleet.rows("SELECT 1 FROM unreachable_reports") == []
    assert _miss(fleet, agent) == OFFLINE_MISS
    assert fleet.rows("SELECT id, data FROM events ORDER BY id") == events


def test_another_agents_miss_does_not_make_the_slot_this_agents(
    api: Api, fleet: Fleet, agent: Agent, make_agent, make_org
) -> None:
    other = make_agent(make_org("Other"), "db-01")
    # This agent's schedule moved before the night: only the other one's miss is on record.
    _schedule(fleet, agent)
    fleet.reconcile(AFTER_NIGHT)
    assert _miss(fleet, other) == OFFLINE_MISS
    fleet.clock.set(AFTER_NIGHT + timedelta(minutes=5))
    status, answer = _report(api, agent, _body())
    assert status == 422, answer
    assert "slot_key" in str(answer) and "no miss of it is on record" in str(answer), answer
    assert fleet.rows("SELECT 1 FROM unreachable_reports") == []
    assert _miss(fleet, other) == OFFLINE_MISS


@pytest.mark.parametrize(
    "changed",
    [
        # The slot "03:00" now opens at 03:00Z, an hour after the night's did.
        pytest.param({"timezone": "UTC"}, id="time_zone"),
        # The window now closes at 02:05Z; the agent tried until 02:14Z, inside the night's.
        pytest.param({"catch_up_minutes": 5}, id="catch_up_shorter"),
    ],
)
def test_a_miss_on_record_is_judged_by_its_own_window_though_the_platform_changed_since(
    api: Api, fleet: Fleet, agent: Agent, changed: dict[str, Any]
) -> None:
    """The miss on record says when the slot opened and when its window closed, as the pass saw
    them; an operator changing the zone or the catch-up window afterwards does not move them."""
    fleet.reconcile(AFTER_NIGHT)
    assert _miss(fleet, agent) == OFFLINE_MISS
    fleet.services.settings.update(changed)
    fleet.clock.set(AFTER_NIGHT + timedelta(hours=2))
    status, answer = _report(api, agent, _body())
    assert (status, answer["result"]) == (200, "corrected"), answer
    assert _miss(fleet, agent) == UNREACHABLE_MISS
    kept = fleet.one(
        "SELECT slot_at FROM unreachable_reports WHERE agent_id = %s", [agent.agent_id]
    )
    assert kept["slot_at"] == NIGHT


def test_a_held_slot_on_record_is_unchanged(api: Api, fleet: Fleet, agent: Agent) -> None:
    """A held agent's slot is consumed by the claim as a miss `held`, written when the claim
    came, with no window's close on record: the report still reads its window and changes
    nothing."""
    fleet.sql(
        "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, miss_reason,"
        " created_at) VALUES (%s, %s, 'schedule', %s, %s, 'missed', 'held', %s)",
        [agent.agent_id, agent.org_id, NIGHT_KEY, NIGHT, NIGHT + timedelta(minutes=1)],
    )
    fleet.clock.set(AFTER_NIGHT + timedelta(hours=1))
    status, answer = _report(api, agent, _body())
    assert (status, answer["result"]) == (200, "unchanged"), answer
    assert "held" in answer["message"]


def test_a_miss_on_record_older_than_the_bound_is_refused(
    api: Api, fleet: Fleet, agent: Agent
) -> None:
    fleet.reconcile(AFTER_NIGHT)
    _schedule(fleet, agent)
    fleet.clock.set(NIGHT + timedelta(days=MAX_UNREACHABLE_REPORT_AGE_DAYS, hours=1))
    status, answer = _report(api, agent, _body())
    assert status == 422, answer
    assert "slot_key" in str(answer) and "older than" in str(answer), answer
    assert _miss(fleet, agent) == OFFLINE_MISS


def fleet_agent(fleet: Fleet, agent: Agent) -> Any:
    from uuid import UUID

    from tests.control_plane.reconcile_fleet import FleetAgent

    return FleetAgent(id=UUID(agent.agent_id), org_id=UUID(agent.org_id), name="web-01")


def test_an_error_with_bidirectional_controls_is_kept_inert(
    api: Api, fleet: Fleet, agent: Agent
) -> None:
    # What a proxy on the way answered is the agent's evidence: never refused for a control in
    # it, but stored with each one as its visible escape, so no reader's line is turned around.
    fleet.reconcile(AFTER_NIGHT)
    fleet.clock.set(AFTER_NIGHT + timedelta(hours=2))
    sent = "502 from proxy \u202eMallory\u2069 (no answer)"
    inert = "502 from proxy \\u202eMallory\\u2069 (no answer)"
    status, answer = _report(api, agent, _body(error=sent))
    assert (status, answer["result"]) == (200, "corrected"), answer
    assert _miss(fleet, agent) == {
        "reason": "unreachable",
        "error": inert,
        "event": {"slot_key": NIGHT_KEY, "reason": "unreachable", "unreachable_error": inert},
    }
    assert fleet.rows("SELECT error FROM unreachable_reports") == [{"error": inert}]


def test_an_error_with_control_characters_and_a_nul_is_kept_inert(
    api: Api, fleet: Fleet, agent: Agent
) -> None:
    # A proxy's error page may hold anything; shown by `agent status` or the command line, an
    # escape sequence in it would rewrite the reader's terminal, and PostgreSQL holds no NUL.
    fleet.reconcile(AFTER_NIGHT)
    fleet.clock.set(AFTER_NIGHT + timedelta(hours=2))
    sent = "502\x00 from proxy\x1b[2J\x1b[Hall is well\x9b\r\n\tretry \udcff"
    inert = "502\\u0000 from proxy\\u001b[2J\\u001b[Hall is well\\u009b\\u000d\n\tretry \\udcff"
    status, answer = _report(api, agent, _body(error=sent))
    assert (status, answer["result"]) == (200, "corrected"), answer
    assert _miss(fleet, agent) == {
        "reason": "unreachable",
        "error": inert,
        "event": {"slot_key": NIGHT_KEY, "reason": "unreachable", "unreachable_error": inert},
    }
    assert fleet.rows("SELECT error FROM unreachable_reports") == [{"error": inert}]


@pytest.mark.parametrize("sent", ["\x00" * 500, "\x1b" * 100 + "x" * 400])
def test_an_error_of_controls_escaped_past_the_limit_is_cut_within_it(
    api: Api, fleet: Fleet, agent: Agent, sent: str
) -> None:
    fleet.clock.set(AFTER_NIGHT)
    status, answer = _report(api, agent, _body(error=sent))
    assert (status, answer["result"]) == (200, "recorded"), answer
    [kept] = fleet.rows("SELECT error FROM unreachable_reports")
    assert len(kept["error"]) <= 500 and kept["error"].endswith("…")
    assert kept["error"][:-1].replace("\\u0000", "").replace("\\u001b", "").strip("x") == ""


def test_an_error_escaped_past_the_limit_is_cut_within_it(
    api: Api, fleet: Fleet, agent: Agent
) -> None:
    # 500 characters as sent; each control written as six makes it longer than the column holds.
    fleet.clock.set(AFTER_NIGHT)
    status, answer = _report(api, agent, _body(error="\u202e" * 100 + "x" * 400))
    assert (status, answer["result"]) == (200, "recorded"), answer
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=1))
    error = _miss(fleet, agent)["error"]
    assert len(error) <= 500 and error.startswith("\\u202e") and error.endswith("…")
