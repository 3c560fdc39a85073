"""A stand-in for `agent_daemon.updater.Updater` for the daemon's unit tests (one seam)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from ground.contract import OutcomeReason


class SimulatedCrash(BaseException):
    """Raised inside a step to stand for the process dying there (the daemon does not catch it)."""


@dataclass
class StubUpdater:
    installed: str | None = "1.4.1"
    floor: int | None = None
    applied: list[UpdateRequest] = field(default_factory=list)
    resumes: int = 0
    # Called on apply; may raise (e.g. SimulatedCrash) or return an outcome to override success.
    on_apply: Callable[[UpdateRequest], UpdateOutcome | None] | None = None
    pending_resume: UpdateOutcome | None = None
    version_of_run: dict[str, str] = field(default_factory=dict)
    settled_with: list[OutcomeReason] = field(default_factory=list)

    def apply(self, request: UpdateRequest) -> UpdateOutcome:
        target = self.version_of_run.get(request.run_id, "1.5.0")
        if self.installed == target and self.on_apply is None:
            # As the real updater: the version already runs (a crash after the switch), so the
            # same run again changes nothing and is not a second install.
            return UpdateOutcome(
                status="succeeded", version=target, error=None, run_id=request.run_id
            )
        self.applied.append(request)
        if self.on_apply is not None:
            outcome = self.on_apply(request)
            if outcome is not None:
                return outcome
        self.installed = self.version_of_run.get(request.run_id, "1.5.0")
        return UpdateOutcome(
            status="succeeded", version=self.installed, error=None, run_id=request.run_id
        )

    def settle(self, reason: OutcomeReason) -> UpdateOutcome | None:
        self.resumes += 1
        self.settled_with.append(reason)
        outcome, self.pending_resume = self.pending_resume, None
        return outcome

    def installed_version(self) -> str | None:
        return self.installed

    def accepted_floor(self, now: datetime) -> int | None:
        return self.floor
