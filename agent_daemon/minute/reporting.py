"""Reports to the control plane, always through the on-disk outbox.

A report is queued durably first and sent second, so a crash or an outage between the two loses
nothing; the outbox sends in order and the control plane's endpoints are idempotent, so a report
queued twice after a restart is harmless. Each delivery, wait or refusal is one log line. The
bodies are the contract's `NothingToDoReport` and `OutcomeReport`.

A report never depends on the disk that may be full: when the outbox cannot be written
the report is kept in memory and sent directly, after whatever the outbox still holds — at most
`MAX_REPORTS_IN_MEMORY` of them, the one dropped at the bound said in an error line. A 409
`outcome_not_authorised` is the control plane recording a switch it did not authorise as what it
is: logged as an error and taken out of the outbox (set aside), never retried.

A report that the agent could not reach the control plane through a slot's window
(`UnreachableReport`) is sent only while the control plane says it speaks contract 7. Behind a
load balancer during a rolling upgrade, the replica a report reaches may still be of the previous
release, which has no such route and answers 404 in no contract's words: the report stays queued
(the reports behind it go on, in their order) and is sent again at the next flush. A 404 in the
contract's words (an unknown agent) is a refusal like any other. The agent gives up on the report
(sets it aside, one warning saying why) only once the control plane would refuse it anyway: its
slot older than `MAX_UNREACHABLE_REPORT_AGE_DAYS`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError

from agent_daemon.connection.control_plane_client import ControlPlaneClient, Delivery
from agent_daemon.connection.outbox import SENT_PER_FLUSH, FlushResult, Outbox, Report
from agent_daemon.errors import ControlPlaneUnreachable
from agent_daemon.host.event_log import EventLog
from agent_daemon.minute.unreachable_slots import UNREACHABLE_CONTRACT
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
from ground.limits import MAX_UNREACHABLE_REPORT_AGE_DAYS

__all__ = [
    "DELIVERY_CONTRACT",
    "MAX_REPORTS_IN_MEMORY",
    "UNREACHABLE_GIVE_UP_AFTER",
    "ReportSender",
]

# At most this many reports the outbox could not hold wait in memory (about 1 KiB each), for a
# disk full while the control plane cannot be reached: a day of a schedule with a slot every 15
# minutes, one report each. At the bound the oldest that is not an update's outcome goes (else
# the oldest outcome), as the outbox makes room, and is said: it is never sent.
MAX_REPORTS_IN_MEMORY = 100

# The contract version from which a control plane reads how a build came (`delivery`).
DELIVERY_CONTRACT = 4
# An unreachable slot's report not delivered by then is given up: the control plane refuses a slot
# older than the bound. Counted from the first try, which the agent made once the slot was due by
# its reckoning of the control plane's clock; the hour covers that reckoning's error, so the agent
# never gives up on a report the control plane would still take.
UNREACHABLE_GIVE_UP_AFTER = timedelta(days=MAX_UNREACHABLE_REPORT_AGE_DAYS, hours=1)


class ReportSender:
    def __init__(
        self,
        *,
        outbox: Outbox,
        control: ControlPlaneClient,
        log: EventLog,
        now: Callable[[], datetime],
    ) -> None:
        self._outbox = outbox
        self._control = control
        self._log = log
        # The control plane's time as the agent follows it (`ServerClock.now`).
        self._now = now
        # The slots whose report waits for a replica that takes it: said once per process.
        self._said_waiting: set[str] = set()
        # The reports `rejected/` could not take: said once per process each.
        self._said_not_set_aside: set[str] = set()
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
            made_room = self._outbox.put(report)
        except OSError as exc:
            self._log.emit(
                "outbox.write_failed",
                level="error",
                slot_key=report.slot_key,
                run_id=report.run_id,
                error=f"{exc.filename or 'outbox'}: {exc.strerror or exc}",
                detail="the report is kept in memory and sent directly",
            )
            self._keep_in_memory(report)
            return
        if made_room is not None:
            self._log.emit(
                "outbox.full",
                level="warning",
                slot_key=made_room.slot_key,
                run_id=made_room.run_id,
                path=made_room.path,
                detail=f"{self._outbox.max_pending} reports wait to be delivered, the most the "
                "outbox holds: the oldest that is not an update's outcome (else the oldest "
                "outcome) was set aside in outbox/rejected/ to make room, never to be sent",
            )

    def _keep_in_memory(self, report: Report) -> None:
        """Kept for a direct send, within `MAX_REPORTS_IN_MEMORY`: at the bound the oldest that
        is not an update's outcome (else the oldest outcome) is dropped, one error line each."""
        self._unsaved.append(report)
        if len(self._unsaved) <= MAX_REPORTS_IN_MEMORY:
            return
        dropped = next((kept for kept in self._unsaved if kept.method != "PATCH"), self._unsaved[0])
        self._unsaved.remove(dropped)
        self._log.emit(
            "report.dropped",
            level="error",
            slot_key=dropped.slot_key,
            run_id=dropped.run_id,
            path=dropped.path,
            status=dropped.body.get("status"),
            detail=f"{MAX_REPORTS_IN_MEMORY} reports wait in memory, the most it keeps while the "
            "outbox cannot be written (free space in the state directory) and the control plane "
            "cannot be reached: this one, the oldest that is not an update's outcome (else the "
            "oldest outcome), is never sent, and the control plane has no record of it",
        )

    def flush(self) -> None:
        result = self._outbox.flush(self._deliver)
        if result.offline is None and not result.more:
            # After whatever the outbox still holds: the reports kept in memory are the newest.
            self._flush_unsaved(result)
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
        for report, delivery in result.waiting:
            if delivery.status == 0 or report.slot_key in self._said_waiting:
                continue
            if report.slot_key is not None:
                self._said_waiting.add(report.slot_key)
            self._log.emit(
                "report.waiting_for_route",
                slot_key=report.slot_key,
                http_status=delivery.status,
                detail=delivery.detail,
            )
        for report, delivery in result.given_up:
            self._log.emit(
                "report.given_up", level="warning", slot_key=report.slot_key, detail=delivery.detail
            )
        for path, problem in result.unreadable:
            self._log.emit("report.unreadable", level="error", path=str(path), error=problem)
        for maybe_report, problem in result.not_set_aside:
            said = (
                problem
                if maybe_report is None
                else f"{maybe_report.method} {maybe_report.path} {maybe_report.slot_key}"
            )
            if said in self._said_not_set_aside:
                continue
            self._said_not_set_aside.add(said)
            self._log.emit(
                "report.set_aside_failed",
                level="error",
                slot_key=None if maybe_report is None else maybe_report.slot_key,
                run_id=None if maybe_report is None else maybe_report.run_id,
                error=problem,
                detail="refused for good, or unreadable, but the outbox's rejected/ cannot take "
                "it: it stays queued and is sent again each minute (said once)",
            )
        if result.more:
            self._log.emit(
                "report.backlog",
                pending=self._pending_count(),
                detail=f"{SENT_PER_FLUSH} reports were sent this minute, the most one minute "
                "sends; the rest go out in the next minutes, in their order",
            )
        if result.offline is not None:
            self._log.emit(
                "report.waiting",
                level="warning",
                pending=self._pending_count(),
                error=str(result.offline),
            )

    def _flush_unsaved(self, result: FlushResult) -> None:
        """The reports kept in memory, as the outbox sends its own (into `result`)."""
        kept: list[Report] = []
        for index, report in enumerate(self._unsaved):
            try:
                delivery = self._deliver(report)
            except ControlPlaneUnreachable:
                kept.extend(self._unsaved[index:])
                break
            if delivery.outcome == "delivered":
                result.delivered.append(report)
            elif delivery.outcome == "later":
                kept.append(report)
                result.waiting.append((report, delivery))
            elif delivery.outcome == "given_up":
                result.given_up.append((report, delivery))
            else:
                result.rejected.append((report, delivery))
        self._unsaved = kept

    def _pending_count(self) -> int:
        try:
            on_disk = self._outbox.count()
        except OSError:
            on_disk = 0
        return on_disk + len(self._unsaved)

    def _deliver(self, report: Report) -> Delivery:
        if report.path == UNREACHABLE_PATH:
            return self._deliver_unreachable(report)
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

    def _deliver_unreachable(self, report: Report) -> Delivery:
        """Sent while the control plane says it takes it; kept for later while a replica without
        its route answers; given up once the control plane would refuse it (see the module)."""
        try:
            first_tried_at = UnreachableReport.model_validate(report.body).first_tried_at
        except ValidationError:
            first_tried_at = None  # the control plane's 422 says what is wrong with it
        if first_tried_at is not None and first_tried_at < self._now() - UNREACHABLE_GIVE_UP_AFTER:
            return Delivery(
                outcome="given_up",
                status=0,
                detail=f"slot {report.slot_key}: the control plane was not told that this host "
                "could not reach it in the slot's window (the control plane reached did not take "
                "such reports: a release older than this agent's) and the slot is now older than "
                f"{MAX_UNREACHABLE_REPORT_AGE_DAYS} days, which the control plane no longer "
                "takes; its miss stays recorded as offline",
            )
        if not self._speaks(UNREACHABLE_CONTRACT):
            # Not sent (status 0): the control plane does not say this minute that it takes it.
            return Delivery(
                outcome="later",
                status=0,
                detail=f"the control plane does not say it speaks contract {UNREACHABLE_CONTRACT}",
            )
        delivery = self._control.deliver(report.method, report.path, report.body)
        if (
            delivery.outcome == "rejected"
            and delivery.status == HTTPStatus.NOT_FOUND
            and delivery.code is None
        ):
            # No such route, in no contract's words: a replica of the previous release.
            return Delivery(
                outcome="later",
                status=delivery.status,
                detail=f"the control plane reached has no {UNREACHABLE_PATH} yet (404: "
                f"{delivery.detail}), as a replica of an older release during an upgrade; "
                "the report is sent again at the next minute",
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
