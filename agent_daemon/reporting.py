"""Reports to the control plane, always through the on-disk outbox.

A report is queued durably first and sent second, so a crash or an outage between the two loses
nothing; the outbox sends in order and the control plane's endpoints are idempotent, so a report
queued twice after a restart is harmless. Each delivery, wait or refusal is one log line. The
bodies are the contract's `NothingToDoReport` and `OutcomeReport`.
"""

from __future__ import annotations

from agent_daemon.control_plane_client import ControlPlaneClient, Delivery
from agent_daemon.event_log import EventLog
from agent_daemon.outbox import Outbox, Report
from agent_daemon.updater import UpdateOutcome
from ground.contract import RUNS_PATH, NothingToDoReport, OutcomeReport, run_path
from ground.contract.messages import MAX_MESSAGE_LENGTH

__all__ = ["ReportSender"]


class ReportSender:
    def __init__(self, *, outbox: Outbox, control: ControlPlaneClient, log: EventLog) -> None:
        self._outbox = outbox
        self._control = control
        self._log = log

    def queue_up_to_date(self, *, slot_key: str, installed: str | None) -> None:
        body = NothingToDoReport(slot_key=slot_key, status="up_to_date", version=installed)
        self._outbox.put(
            Report(
                method="POST",
                path=RUNS_PATH,
                body=body.model_dump(mode="json"),
                slot_key=slot_key,
            )
        )

    def queue_outcome(self, *, slot_key: str | None, outcome: UpdateOutcome) -> None:
        error = outcome.error
        if error is not None and len(error) > MAX_MESSAGE_LENGTH:
            # The contract refuses a longer message; a report must never fail to be built.
            error = error[: MAX_MESSAGE_LENGTH - 1] + "…"
        body = OutcomeReport(status=outcome.status, version=outcome.version, error=error)
        self._outbox.put(
            Report(
                method="PATCH",
                path=run_path(outcome.run_id),
                body=body.model_dump(mode="json"),
                slot_key=slot_key,
                run_id=outcome.run_id,
            )
        )

    def flush(self) -> None:
        result = self._outbox.flush(self._deliver)
        for report in result.delivered:
            self._log.emit(
                "report.delivered",
                slot_key=report.slot_key,
                run_id=report.run_id,
                status=report.body.get("status"),
            )
        for report, delivery in result.rejected:
            self._log.emit(
                "report.rejected",
                level="warning",
                slot_key=report.slot_key,
                run_id=report.run_id,
                http_status=delivery.status,
                detail=delivery.detail,
            )
        for path, problem in result.unreadable:
            self._log.emit("report.unreadable", level="error", path=str(path), error=problem)
        if result.offline is not None:
            self._log.emit(
                "report.waiting",
                level="warning",
                pending=len(self._outbox.pending()),
                error=str(result.offline),
            )

    def _deliver(self, report: Report) -> Delivery:
        return self._control.deliver(report.method, report.path, report.body)
