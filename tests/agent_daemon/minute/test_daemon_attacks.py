"""Attacks at the daemon: answers of the control plane that must end as an outcome or a log line,
the server clock's bound, and interrupted updates finished on later minutes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from agent_daemon.connection import wire
from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import MAX_SERVER_CLOCK_OFFSET, ServerClock
from agent_daemon.errors import AgentError
from agent_daemon.updater.update_records import UpdateOutcome
from ground.contract import SERVER_TIME_HEADER, ClaimGrant, format_instant
from tests.agent_daemon.daemon_support.fake_control_plane import FakeControlPlane, Run
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.worlds.clocks import ManualClock, SkewedClock

SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
ORPHAN_RUN = "0d7a0000-0000-4000-8000-0000000000ff"


def make(tmp_path: Path, **plane: object) -> tuple[Harness, ManualClock]:
    clock = ManualClock(SLOT_AT)
    control_plane = FakeControlPlane(now=clock.now, **plane)  # type: ignore[arg-type]
    return Harness(tmp_path, control_plane, StubUpdater(), clock), clock


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("manifest_b64", "not base64 at all!", id="manifest_not_base64"),
        pytest.param("signature_b64", "QUJD=extra", id="signature_with_trailing_junk"),
    ],
)
def test_a_grant_whose_release_is_not_base64_is_reported_failed_and_the_claim_ends(
    tmp_path: Path, field: str, value: str
) -> None:
    h, clock = make(tmp_path)
    original = h.control_plane._grant

    def garbled(run: Run) -> ClaimGrant:
        grant = original(run)
        return grant.model_copy(update={"release": grant.release.model_copy(update={field: value})})

    h.control_plane._grant = garbled  # type: ignore[method-assign]
    assert h.daemon.tick() == "dispatched"
    (run,) = h.control_plane.runs.values()
    assert run.status == "failed"
    assert f"{field}: " in (run.error or "")
    assert h.state().claim is None
    assert h.updater.applied == []
    clock.advance(minutes=1)
    assert h.daemon.tick() == "no_slot"


def test_an_artifact_url_that_cannot_be_joined_still_makes_a_claim_that_ends(
    tmp_path: Path,
) -> None:
    h, _ = make(tmp_path)
    original = h.control_plane._grant

    def unjoinable(run: Run) -> ClaimGrant:
        grant = original(run)
        return grant.model_copy(
            update={"release": grant.release.model_copy(update={"artifact_url": "http://[::1"})}
        )

    h.control_plane._grant = unjoinable  # type: ignore[method-assign]
    assert h.daemon.tick() == "dispatched"
    (request,) = h.updater.applied
    assert request.artifact_url == "http://[::1"  # the updater refuses it as an outcome
    assert h.state().claim is None


def test_the_daemon_finishes_an_interrupted_update_on_a_later_tick_not_only_at_start(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path, release_version="1.4.1")
    assert h.daemon.tick() == "up_to_date"
    # The updater was interrupted after the daemon had already given its claim up.
    h.updater.pending_resume = UpdateOutcome(
        status="rolled_back", version="1.4.1", error="given up after 3 attempts", run_id=ORPHAN_RUN
    )
    clock.advance(minutes=1)
    h.daemon.tick()
    assert h.updater.pending_resume is None
    resumed = [e for e in h.events() if e["event"] == "update.resumed"]
    assert [(e["run_id"], e["status"]) for e in resumed] == [(ORPHAN_RUN, "rolled_back")]
    patched = [path for path in h.control_plane.requests if ORPHAN_RUN in path]
    assert patched, "the resumed outcome is reported"


def test_a_resume_that_raises_costs_a_log_line_not_the_minute(tmp_path: Path) -> None:
    h, _ = make(tmp_path, release_version="1.4.1")

    def broken(reason: object) -> UpdateOutcome | None:
        raise RecursionError("a defect in settle")

    h.updater.settle = broken  # type: ignore[method-assign,assignment]
    assert h.daemon.tick() == "up_to_date"
    assert "update.resume_failed" in h.event_names()


# -- item 4: the clock the control plane shows -----------------------------------------------------


def client_answering(status: int, server_time: datetime, clock: ServerClock) -> ControlPlaneClient:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status,
            json={"detail": "nope"},
            headers={SERVER_TIME_HEADER: format_instant(server_time)},
        )

    http = build_http_client(
        base_url="http://control.test",
        credential="nwa_test_credential",
        timeout_seconds=5,
        transport=httpx.MockTransport(answer),
    )
    return ControlPlaneClient(http=http, server_clock=clock)


@pytest.mark.parametrize("status", [400, 404, 409, 429, 500, 502, 503])
def test_an_error_answer_never_moves_the_clock(status: int) -> None:
    clock = ServerClock(ManualClock(SLOT_AT))
    client = client_answering(status, SLOT_AT - timedelta(days=3), clock)
    with pytest.raises(AgentError):  # offline, refused or a bad answer: the agent's own words
        client.fetch_config(etag=None)
    assert clock.offset == timedelta(0)
    assert clock.now() == SLOT_AT


@pytest.mark.parametrize(
    "offset",
    [
        pytest.param(timedelta(days=-400), id="a_year_back"),
        pytest.param(timedelta(days=30), id="a_month_ahead"),
    ],
)
def test_an_offset_beyond_the_bound_is_kept_at_the_bound_and_said_loudly(
    tmp_path: Path, offset: timedelta
) -> None:
    server = ManualClock(SLOT_AT + offset)
    control_plane = FakeControlPlane(now=server.now)
    host = SkewedClock(server, -offset)  # the host's clock is right; the server's is not
    h = Harness(tmp_path, control_plane, StubUpdater(), host)
    h.daemon.tick()
    clock = ServerClock(host)
    clock.learn(server.now(), local_time=host.now())
    assert abs(clock.offset) == MAX_SERVER_CLOCK_OFFSET
    assert clock.disagreement == offset
    assert clock.expiry_clock().now() >= host.now()
    warnings = [e for e in h.events() if e["event"] == "clock.disagrees"]
    assert len(warnings) == 1
    assert warnings[0]["level"] == "warning"
    assert warnings[0]["measured_offset_seconds"] == offset.total_seconds()
    h.daemon.tick()  # the same minute's disagreement is not repeated every minute
    assert len([e for e in h.events() if e["event"] == "clock.disagrees"]) == 1


def test_an_offset_within_the_bound_is_followed_and_not_a_warning(tmp_path: Path) -> None:
    server = ManualClock(SLOT_AT)
    host = SkewedClock(server, timedelta(hours=-6))
    h = Harness(tmp_path, FakeControlPlane(now=server.now), StubUpdater(), host)
    h.daemon.tick()
    assert "clock.disagrees" not in h.event_names()


def test_the_expiry_clock_is_never_behind_the_host() -> None:
    host = ManualClock(SLOT_AT)
    clock = ServerClock(host)
    clock.learn_offset(timedelta(hours=-5))
    assert clock.now() == SLOT_AT - timedelta(hours=5)
    assert clock.expiry_clock().now() == SLOT_AT
    clock.learn_offset(timedelta(hours=2))
    assert clock.expiry_clock().now() == SLOT_AT + timedelta(hours=2)


@pytest.mark.parametrize(
    "seconds",
    [float("nan"), float("inf"), 1e300, -1e300],
    ids=["nan", "inf", "huge", "huge_negative"],
)
def test_a_cached_offset_that_is_not_a_sane_number_is_bounded_or_ignored(seconds: float) -> None:
    clock = ServerClock(ManualClock(SLOT_AT))
    clock.learn_offset_seconds(seconds)
    assert abs(clock.offset) <= MAX_SERVER_CLOCK_OFFSET


# -- item 7: the control plane's answers are bounded before parsing --------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested_a_hundred_thousand_deep"),
        pytest.param(b'{"agent_id": ' + b"9" * 5000 + b"}", id="five_thousand_digit_number"),
        pytest.param(b" " * (2 * 1024 * 1024) + b"{}", id="two_megabytes"),
    ],
)
def test_a_hostile_config_answer_is_a_bad_config_that_consumes_nothing(
    tmp_path: Path, body: bytes
) -> None:
    h, _ = make(tmp_path, config_body=body)
    assert h.daemon.tick() == "bad_config"
    assert h.state().last_consumed is None
    assert "tick.crashed" not in h.event_names()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"detail": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", id="nested"),
        pytest.param(b'{"detail": {"code": ' + b"1" * 5000 + b"}}", id="huge_number"),
    ],
)
def test_a_hostile_error_body_is_read_as_no_detail(body: bytes) -> None:
    assert wire.error_detail(body) is None
    assert wire.is_offline(503, body)
    assert isinstance(wire.detail_text(body), str)
