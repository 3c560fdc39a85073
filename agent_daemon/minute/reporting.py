"""Reports to the control plane, always through the on-disk outbox.

A report is queued durably first and sent second, so a crash or an outage between the two loses
nothing; the outbox sends in order and the control plane's endpoints are idempotent, so a report
queued twice after a restart is harmless. Each delivery, wait or refusal is one log line. The
bodies are the contract's `NothingToDoReport` and `OutcomeReport`.

A report never depends on the disk that may be full: when the outbox cannot be written
the report is kept in memory and sent directly, after whatever the outbox still holds. A 409
`outcome_not_authorised` is the control plane recording a switch it did not authorise as what it
is: logged as an error and taken out of the outbox (set aside), never retried.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from agent_daemon.connection.control_plane_client import ControlPlaneClient, Delivery
from agent_daemon.connection.outbox import Outbox, Report
from agent_daemon.errors import ControlPlaneUnreachable, DaemonStateError
from agent_daemon.host.event_log import EventLog
from agent_daemon.updater.update_records import UpdateOutcome
from ground.contract import (
    RUNS_PATH,
    UNREACHABLE_PATH,
    AnswerCode,
    DeliveryReport,
    NothingToDoReport,
    OutcomeReason,
    OutcomeReport,
    UnreachableReport,
    reason_for_contract,
    run_path,
)
from ground.contract.messages import MAX_MESSAGE_LENGTH
from ground.contract.plain_text import clipped

__all__ = ["DELIVERY_CONTRACT", "ReportSender"]

# The contract version from which a control plane reads how a build came (`delivery`).
DELIVERY_CONTRACT = 4


class ReportSender:
    def __init__(self, *, outbox: Outbox, control: ControlPlaneClient, log: EventLog) -> None:
        self._outbox = outbox
        self._control = control
        self._log = log
        # Reports the outbox could not hold (its disk full or read-only), oldest first.
        self._unsaved: list[Report] = []
        # The version of nachtwacht's own agent, sent with each report while the control plane
        # reads it (a control plane of an older contract refuses a field it does not know).
        self.updater_version: str | None = None
        # The contract the control plane said it speaks this minute (None: not heard from). A
        # report says only what that contract knows: a control plane of an older contract
        # refuses a field or a reason it does not know.
        self.control_plane_contract: int | None = None

    def queue_up_to_date(self, *, slot_key: str, installed: str | None) -> None:
        body = NothingToDoReport(
            slot_key=slot_key,
            status="up_to_date",
            version=installed,
            updater_version=self.updater_version,
        )
        self._put(
            Report(
                method="POST",
                path=RUNS_PATH,
                body=_without_unsaid(body.model_dump(mode="json")),
                slot_key=slot_key,
            )
        )

    def queue_unreachable(self, report: UnreachableReport) -> None:
        """The slot's window passed (or is passing) while the control plane could not be reached
        (`unreachable_slots`): said once it can be."""
        self._put(
            Report(
                method="POST",
                path=UNREACHABLE_PATH,
                body=report.model_dump(mode="json"),
                slot_key=report.slot_key,
            )
        )

    def queue_outcome(self, *, slot_key: str | None, outcome: UpdateOutcome) -> None:
        # The contract refuses a longer message; a report must never fail to be built.
        error = None if outcome.error is None else clipped(outcome.error, MAX_MESSAGE_LENGTH)
        body = OutcomeReport(
            status=outcome.status,
            version=outcome.version,
            error=error,
            reason=reason_for_contract(outcome.reason, self.control_plane_contract),
            switched_at=outcome.switched_at,
            updater_version=self.updater_version,
            delivery=_delivery(outcome) if self._speaks(DELIVERY_CONTRACT) else None,
        )
        self._put(
            Report(
                method="PATCH",
                path=run_path(outcome.run_id),
                body=_without_unsaid(body.model_dump(mode="json")),
                slot_key=slot_key,
                run_id=outcome.run_id,
            )
        )

    def _speaks(self, contract: int) -> bool:
        return self.control_plane_contract is not None and self.control_plane_contract >= contract

    def _put(self, report: Report) -> None:
        try:
            self._outbox.put(report)
        except OSError as exc:
            self._unsaved.append(report)
            self._log.emit(
                "outbox.write_failed",
                level="error",
                slot_key=report.slot_key,
                run_id=report.run_id,
                error=f"{exc.filename or 'outbox'}: {exc.strerror or exc}",
                detail="the report is kept in memory and sent directly",
            )

    def flush(self) -> None:
        result = self._outbox.flush(self._deliver)
        if result.offline is None:
            self._flush_unsaved(result.delivered, result.rejected)
        for report in result.delivered:
            self._log.emit(
                "report.delivered",
                slot_key=report.slot_key,
                run_id=report.run_id,
                status=report.body.get("status"),
            )
        for report, delivery in result.rejected:
            if delivery.code == AnswerCode.OUTCOME_NOT_AUTHORISED.value:
                self._log.emit(
                    "report.not_authorised",
                    level="error",
                    slot_key=report.slot_key,
                    run_id=report.run_id,
                    status=report.body.get("status"),
                    detail=delivery.detail,
                )
                continue
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
                pending=self._pending_count(),
                error=str(result.offline),
            )

    def _flush_unsaved(
        self, delivered: list[Report], rejected: list[tuple[Report, Delivery]]
    ) -> None:
        while self._unsaved:
            report = self._unsaved[0]
            try:
                delivery = self._deliver(report)
            except ControlPlaneUnreachable:
                return
            self._unsaved.pop(0)
            if delivery.outcome == "delivered":
                delivered.append(report)
            else:
                rejected.append((report, delivery))

    def _pending_count(self) -> int:
        try:
            on_disk = len(self._outbox.pending())
        except (OSError, DaemonStateError):
            on_disk = 0
        return on_disk + len(self._unsaved)

    def _deliver(self, report: Report) -> Delivery:
        delivery = self._control.deliver(report.method, report.path, report.body)
        said = _outcome_reason(report.body.get("reason"))
        older = reason_for_contract(said, None)
        if (
            delivery.outcome == "rejected"
            and delivery.status == HTTPStatus.UNPROCESSABLE_ENTITY
            and older is not said
        ):
            # During a rolling upgrade the replica that said it speaks the contract that knows
            # the reason and the one this report reached may differ: an older one refuses it (a
            # refused report is set aside for good). Told in the words of the oldest contract, as
            # such a control plane always is, the run's ending still arrives.
            return self._control.deliver(
                report.method, report.path, {**report.body, "reason": str(older)}
            )
        return delivery


def _outcome_reason(said: object) -> OutcomeReason | None:
    """The outcome reason a queued report's body names, if it names one this agent knows."""
    if isinstance(said, str) and said in set(OutcomeReason):
        return OutcomeReason(said)
    return None


def _delivery(outcome: UpdateOutcome) -> DeliveryReport | None:
    if outcome.delivery is None:
        return None
    return DeliveryReport(kind=outcome.delivery, fallback_reason=outcome.fallback_reason)


def _without_unsaid(body: dict[str, Any]) -> dict[str, Any]:
    """The report without an `updater_version` or `delivery` it does not give: the body a control
    plane of an older contract reads (it refuses a field it does not know)."""
    for field in ("updater_version", "delivery"):
        if body.get(field) is None:
            body.pop(field, None)
    return body
