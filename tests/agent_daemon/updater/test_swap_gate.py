"""Revocation is honoured up to the swap, on a real host: the updater asks
immediately before it switches `current`, and only a `SwapAllowed` lets it switch. Also: a run
whose window closed is settled without a new switch, and failures name their reason."""

from __future__ import annotations

import errno
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from agent_daemon.errors import (
    ArtifactMismatch,
    DownloadRefused,
    DownloadStalled,
    DownloadTooLong,
    DownloadUnavailable,
    HealthCheckFailed,
    NotEnoughDisk,
    SelfTestFailed,
    UntrustedArtifactSource,
    UpdateInProgress,
)
from agent_daemon.updater.download import fetch
from agent_daemon.updater.failure_reasons import failure_reason
from agent_daemon.updater.swap_gate import SwapAllowed, SwapRefused, SwapUnanswered, SwapVerdict
from agent_daemon.updater.update_records import UpdateRequest
from ground.contract import OutcomeReason
from tests.agent_daemon.updater_support.host import Host, host_running

pytestmark = pytest.mark.slow

SWITCHED_AT = datetime(2026, 11, 30, 2, 3, tzinfo=UTC)


def gated(request: UpdateRequest, *verdicts: SwapVerdict) -> tuple[UpdateRequest, list[int]]:
    """`request` with a confirmation answering `verdicts` in turn; the list counts the asks."""
    asked: list[int] = []

    def confirm() -> SwapVerdict:
        asked.append(1)
        return verdicts[min(len(asked), len(verdicts)) - 1]

    return replace(request, confirm_swap=confirm), asked


def assert_untouched(host: Host) -> None:
    assert host.current() == "versions/1.4.1"
    assert host.running_version() == "1.4.1"


def test_a_permitted_swap_switches_and_reports_when(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        request, asked = gated(
            host.request(host.factory.release("1.5.0", 42), "run-1"),
            SwapAllowed(at=SWITCHED_AT),
        )
        outcome = host.updater().apply(request)
        assert (outcome.status, outcome.version, outcome.reason) == ("succeeded", "1.5.0", None)
        assert outcome.switched_at == SWITCHED_AT
        assert asked == [1]
        assert host.current() == "versions/1.5.0"


@pytest.mark.parametrize(
    "reason",
    [
        pytest.param(OutcomeReason.TOKEN_REVOKED, id="brake_revoked_the_token"),
        pytest.param(OutcomeReason.TOKEN_EXPIRED, id="token_expired"),
    ],
)
def test_a_token_revoked_before_the_swap_never_switches_and_cleans_the_staged_build(
    tmp_path: Path, reason: OutcomeReason
) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        request, asked = gated(
            host.request(release, "run-1"), SwapRefused(reason=reason, error=f"403 {reason}")
        )
        outcome = host.updater().apply(request)
        assert (outcome.status, outcome.reason, outcome.retry) == ("failed", reason, False)
        assert outcome.switched_at is None
        assert asked == [1]
        assert_untouched(host)
        assert not (host.install_root / "versions/1.5.0").exists()
        assert list((host.state_dir / "staging").iterdir()) == []
        assert host.state()["in_progress"] is None


def test_an_unanswered_confirmation_keeps_the_staged_build_and_asks_again(
    tmp_path: Path,
) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        request, asked = gated(
            host.request(release, "run-1"),
            SwapUnanswered(reason=OutcomeReason.PLATFORM_UNAVAILABLE, error="503"),
            SwapUnanswered(reason=OutcomeReason.PLATFORM_UNAVAILABLE, error="503"),
            SwapUnanswered(reason=OutcomeReason.PLATFORM_UNAVAILABLE, error="503"),
            SwapAllowed(at=SWITCHED_AT),
        )
        updater = host.updater()
        # More deferrals than MAX_RUN_ATTEMPTS: an unanswered question is not an attempt.
        for _ in range(3):
            deferred = updater.apply(request)
            assert (deferred.status, deferred.reason, deferred.retry) == (
                "failed",
                OutcomeReason.PLATFORM_UNAVAILABLE,
                True,
            )
            assert_untouched(host)
            assert host.state()["in_progress"]["step"] == "installed"
            assert (host.install_root / "versions/1.5.0/.complete").exists()
        downloads = len(host.server.requests("/v1/agent/runs/run-1/artifact"))
        outcome = updater.apply(request)
        assert (outcome.status, outcome.switched_at) == ("succeeded", SWITCHED_AT)
        assert asked == [1, 1, 1, 1]
        assert len(host.server.requests("/v1/agent/runs/run-1/artifact")) == downloads == 1
        assert host.current() == "versions/1.5.0"


def test_settle_after_the_window_never_switches_a_staged_build(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        request, _ = gated(
            host.request(host.factory.release("1.5.0", 42), "run-1"),
            SwapUnanswered(reason=OutcomeReason.PLATFORM_UNAVAILABLE, error="no answer"),
        )
        host.updater().apply(request)
        assert host.state()["in_progress"]["step"] == "installed"
        settled = host.updater().settle(OutcomeReason.PLATFORM_UNAVAILABLE)
        assert settled is not None
        assert (settled.run_id, settled.status, settled.reason) == (
            "run-1",
            "failed",
            OutcomeReason.PLATFORM_UNAVAILABLE,
        )
        assert_untouched(host)
        assert host.state()["in_progress"] is None
        assert host.updater().settle(OutcomeReason.INTERRUPTED) is None


def test_a_download_refused_with_token_revoked_keeps_the_servers_code(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        request = host.request(host.factory.release("1.5.0", 42), "run-1")
        host.server.refuse("/v1/agent/runs/run-1/artifact", status=403, code="token_revoked")
        outcome = host.updater().apply(request)
        assert (outcome.status, outcome.reason, outcome.retry) == (
            "failed",
            OutcomeReason.TOKEN_REVOKED,
            False,
        )
        assert "token_revoked" in (outcome.error or "")
        assert_untouched(host)


def test_a_download_answered_503_is_the_platform_unavailable_and_may_pass(
    tmp_path: Path,
) -> None:
    with host_running(tmp_path) as host:
        request = host.request(host.factory.release("1.5.0", 42), "run-1")
        host.server.refuse("/v1/agent/runs/run-1/artifact", status=503, code="database_unavailable")
        outcome = host.updater().apply(request)
        assert (outcome.status, outcome.reason, outcome.retry) == (
            "failed",
            OutcomeReason.PLATFORM_UNAVAILABLE,
            True,
        )
        assert_untouched(host)


def test_a_cut_download_may_pass_and_the_next_apply_resumes_it(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        path = "/v1/agent/runs/run-1/artifact"
        request = host.request(release, "run-1", behaviour="cut_once", cut_after=500)
        first = host.updater().apply(request)
        assert (first.status, first.reason, first.retry) == (
            "failed",
            OutcomeReason.DOWNLOAD_FAILED,
            True,
        )
        second = host.updater().apply(request)
        assert second.status == "succeeded"
        assert host.server.requests(path)[1]["range"] == "bytes=500-"


def test_a_full_disk_while_downloading_is_disk_full_and_may_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with host_running(tmp_path) as host:
        request = host.request(host.factory.release("1.5.0", 42), "run-1")

        class FullDisk:
            """The `.part` file, on a disk with no space left."""

            def __init__(self, sink: BinaryIO) -> None:
                self.sink = sink

            def write(self, chunk: bytes) -> int:
                raise OSError(errno.ENOSPC, "No space left on device", "staging")

        copy_body = fetch._copy_body

        def copy_to_a_full_disk(response: Any, sink: BinaryIO, *args: Any, **kwargs: Any) -> None:
            copy_body(response, FullDisk(sink), *args, **kwargs)  # type: ignore[arg-type]

        # The download's bytes meet a full disk (the injected seam: the sink they are written to).
        monkeypatch.setattr(fetch, "_copy_body", copy_to_a_full_disk)
        outcome = host.updater().apply(request)
        assert (outcome.status, outcome.reason, outcome.retry) == (
            "failed",
            OutcomeReason.DISK_FULL,
            True,
        )
        assert "No space left on device" in (outcome.error or "")
        assert_untouched(host)
        monkeypatch.undo()
        assert host.updater().apply(request).status == "succeeded"


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        pytest.param(
            DownloadRefused("403", status=403, code="token_revoked"),
            (OutcomeReason.TOKEN_REVOKED, False),
            id="download_token_revoked",
        ),
        pytest.param(
            DownloadRefused("404", status=404, code="run_not_found"),
            (OutcomeReason.DOWNLOAD_FAILED, False),
            id="download_refused_otherwise",
        ),
        pytest.param(
            DownloadUnavailable("503"), (OutcomeReason.PLATFORM_UNAVAILABLE, True), id="5xx"
        ),
        pytest.param(DownloadStalled("slow"), (OutcomeReason.DOWNLOAD_FAILED, True), id="stall"),
        pytest.param(
            DownloadTooLong("more"), (OutcomeReason.DOWNLOAD_FAILED, False), id="overlong"
        ),
        pytest.param(NotEnoughDisk("full"), (OutcomeReason.DISK_FULL, True), id="no_room"),
        pytest.param(OSError(errno.EDQUOT, "quota"), (OutcomeReason.DISK_FULL, True), id="quota"),
        pytest.param(
            ArtifactMismatch("tampered"),
            (OutcomeReason.VERIFICATION_FAILED, False),
            id="tampered",
        ),
        pytest.param(SelfTestFailed("no"), (OutcomeReason.INSTALL_FAILED, False), id="self_test"),
        pytest.param(
            UntrustedArtifactSource("elsewhere"),
            (OutcomeReason.VERIFICATION_FAILED, False),
            id="artifact_from_an_untrusted_origin",
        ),
        pytest.param(
            HealthCheckFailed("old version"),
            (OutcomeReason.HEALTH_CHECK_FAILED, False),
            id="unhealthy_after_restart",
        ),
        pytest.param(
            UpdateInProgress("locked"), (OutcomeReason.INTERRUPTED, True), id="another_update"
        ),
        pytest.param(ValueError("bug"), (None, False), id="not_an_update_failure"),
        pytest.param(
            OSError(errno.EROFS, "read-only"), (OutcomeReason.INTERRUPTED, True), id="read_only"
        ),
    ],
)
def test_every_failure_names_its_reason_and_whether_it_may_pass(
    failure: BaseException, expected: tuple[OutcomeReason | None, bool]
) -> None:
    assert failure_reason(failure) == expected
