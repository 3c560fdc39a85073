"""Run rows after the claim: "nothing to do", outcomes, manual updates, the artifact a run may
download, and the panel's lists. All their SQL; every write takes `now` from its caller."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args
from uuid import UUID

import psycopg

from control_plane.agent_scope import require_agent, require_agents, unknown_agent
from control_plane.claims.slots import checked_slot_of
from control_plane.errors import ClaimRefused, Conflict, Forbidden, InvalidInput, NotFound
from control_plane.events.services import record_event
from control_plane.events.trail import Actor, ActorKind, record_action
from control_plane.inputs import agent_text
from control_plane.releases.services import ArtifactInfo
from control_plane.runs.authority import (
    read_lease,
    swap_permit,
)
from control_plane.runs.current_version import report_version
from control_plane.runs.outcomes import Outcome, record_outcome
from control_plane.runs.unreachable import record_unreachable
from control_plane.runs.views import (
    RUN_COLUMNS,
    Operation,
    RunView,
    latest_runs,
    operation_view,
    read_run,
    run_view,
)
from control_plane.types import Connection, Pool
from control_plane.updater_versions import note_updater_version
from ground.contract import (
    AnswerCode,
    DeliveryReport,
    Instant,
    OutcomeReason,
    OutcomeStatus,
    PatchFallbackReason,
    RefusalCode,
    SwapPermit,
    UnreachableAnswer,
    UnreachableReport,
    format_instant,
)
from ground.contract.messages import MAX_MESSAGE_LENGTH
from ground.limits import MAX_VERSION_LENGTH

__all__ = [
    "OUTCOMES",
    "ManualRequests",
    "NightOutcomes",
    "Operations",
    "RecordedRun",
    "ReleaseRetry",
    "RunList",
    "RunService",
    "SlotOutcomes",
]

OUTCOMES: tuple[str, ...] = get_args(OutcomeStatus)
MAX_ERROR_LENGTH = MAX_MESSAGE_LENGTH


@dataclass(frozen=True, kw_only=True)
class RecordedRun:
    """A run a request wrote, or found already written by the same request asked before."""

    created: bool
    run: RunView


@dataclass(frozen=True, kw_only=True)
class ReleaseRetry:
    """An operator asked that this agent be offered again a release it rolled back."""

    agent_id: UUID
    requested_at: Instant


@dataclass(frozen=True, kw_only=True)
class RunList:
    runs: tuple[RunView, ...]


@dataclass(frozen=True, kw_only=True)
class Operations:
    operations: tuple[Operation, ...]


@dataclass(frozen=True, kw_only=True)
class SlotOutcomes:
    """One slot's scheduled runs counted per status (`missed` included once the worker has
    recorded the slot's misses), and its missed runs per reason."""

    slot_at: Instant
    counts: dict[str, int]
    missed_by_reason: dict[str, int]


@dataclass(frozen=True, kw_only=True)
class NightOutcomes:
    slots: tuple[SlotOutcomes, ...]


@dataclass(frozen=True, kw_only=True)
class ManualRequests:
    """Updates asked for many agents at once: how many were asked now, and how many agents
    already had one pending (they keep it)."""

    requested: int
    pending: int


def _insert_manual_run(
    conn: Connection,
    org_id: UUID,
    agent_id: UUID,
    requested_by: UUID | None,
    *,
    now: datetime,
    actor_kind: ActorKind,
    person: tuple[UUID, str] | None = None,
) -> UUID:
    """A requested manual run and its event; a second pending one is refused by the database
    (`runs_one_pending_manual`), which the caller's savepoint takes back. `requested_by` is the
    credential that asked; a named person asks with none, and the trail names them (`person`:
    their id and name)."""
    row = conn.execute(
        "INSERT INTO runs (agent_id, org_id, trigger, status, requested_by,"
        " created_at) VALUES (%s, %s, 'manual', 'requested', %s, %s) RETURNING id",
        [agent_id, org_id, requested_by, now],
    ).fetchone()
    assert row is not None
    record_event(
        conn,
        org_id=org_id,
        agent_id=agent_id,
        run_id=row["id"],
        kind="update.requested",
        actor_kind=actor_kind,
        actor_id=requested_by if person is None else person[0],
        actor_name=None if person is None else person[1],
        at=now,
    )
    run_id: UUID = row["id"]
    return run_id


class RunService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def record_unreachable(
        self, agent_id: UUID, report: UnreachableReport, now: datetime
    ) -> UnreachableAnswer:
        """The agent could not reach the control plane through the slot's window
        (`control_plane.runs.unreachable`)."""
        with self._pool.connection() as conn:
            return record_unreachable(conn, agent_id, report, now)

    def record_up_to_date(
        self,
        agent_id: UUID,
        slot_key: str,
        version: object,
        now: datetime,
        *,
        updater_version: object = None,
    ) -> RecordedRun:
        """Nothing to do: a run row that consumes the slot (idempotent). `updater_version`: the
        version of nachtwacht's own agent the host runs, kept with the agent."""
        version_text = agent_text("version", version, MAX_VERSION_LENGTH)
        updater_text = agent_text("updater_version", updater_version, MAX_VERSION_LENGTH)
        with self._pool.connection() as conn:
            agent = conn.execute(
                "SELECT a.org_id, a.update_schedule_enabled AS enabled,"
                " a.update_schedule_times AS times, s.timezone, s.catch_up_minutes,"
                " a.created_at AS enrolled_at,"
                " (SELECT max(slot_at) FROM runs WHERE agent_id = a.id AND trigger = 'schedule')"
                " AS last_consumed_at"
                " FROM agents a CROSS JOIN platform_settings s WHERE a.id = %s",
                [agent_id],
            ).fetchone()
            if agent is None:
                raise unknown_agent(agent_id)
            slot = checked_slot_of(agent, slot_key, now)
            existing = self._scheduled_run(conn, agent_id, slot_key)
            if existing is not None:
                return RecordedRun(created=False, run=self._same_up_to_date(existing, slot_key))
            if agent["last_consumed_at"] is not None and slot.at <= agent["last_consumed_at"]:
                raise ClaimRefused(
                    RefusalCode.SLOT_CONSUMED,
                    f"slot_key: {slot_key!r} is at or before a slot this agent already consumed",
                )
            try:
                with conn.transaction():
                    row = conn.execute(
                        "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
                        " from_version, version, created_at, finished_at)"
                        " VALUES (%(agent)s, %(org)s, 'schedule', %(key)s, %(at)s, 'up_to_date',"
                        " %(version)s, %(version)s, %(now)s, %(now)s)"
                        " RETURNING id",
                        {
                            "agent": agent_id,
                            "org": agent["org_id"],
                            "key": slot_key,
                            "at": slot.at,
                            "version": version_text,
                            "now": now,
                        },
                    ).fetchone()
                    assert row is not None
                    if version_text is not None:
                        report_version(conn, agent_id, version_text, now)
                    if updater_text is not None:
                        note_updater_version(conn, agent_id, updater_text, now)
                    record_event(
                        conn,
                        org_id=agent["org_id"],
                        agent_id=agent_id,
                        run_id=row["id"],
                        kind="update.up_to_date",
                        actor_kind="schedule",
                        at=now,
                        data={"slot_key": slot_key, "version": version_text},
                    )
            except psycopg.errors.UniqueViolation:
                existing = self._scheduled_run(conn, agent_id, slot_key)
                assert existing is not None
                return RecordedRun(created=False, run=self._same_up_to_date(existing, slot_key))
            return RecordedRun(created=True, run=run_view(read_run(conn, row["id"])))

    @staticmethod
    def _scheduled_run(conn: Connection, agent_id: UUID, slot_key: str) -> dict[str, Any] | None:
        row: dict[str, Any] | None = conn.execute(
            f"SELECT {RUN_COLUMNS} FROM runs r LEFT JOIN releases rel ON rel.id = r.release_id"  # noqa: S608 - constant columns
            " WHERE r.agent_id = %s AND r.trigger = 'schedule' AND r.slot_key = %s",
            [agent_id, slot_key],
        ).fetchone()
        return row

    @staticmethod
    def _same_up_to_date(existing: dict[str, Any], slot_key: str) -> RunView:
        if existing["status"] != "up_to_date":
            raise ClaimRefused(
                RefusalCode.SLOT_CONSUMED,
                f"slot_key: {slot_key!r} was already consumed ({existing['status']})",
            )
        return run_view(existing)

    def report_outcome(
        self,
        agent_id: UUID,
        run_id: UUID,
        status: str,
        version: object,
        error: object,
        *,
        now: datetime,
        reason: OutcomeReason | None = None,
        switched_at: datetime | None = None,
        updater_version: object = None,
        delivery: DeliveryReport | None = None,
    ) -> RunView:
        """The outcome of a claimed run: only its agent, only from `claimed`, idempotent.

        A switch (`succeeded`, `rolled_back`) at `switched_at` (else now) after the run's token
        was revoked or expired, or after its window closed, is stored as `unauthorised` and
        refused with 409 `outcome_not_authorised`. A run the reconcile ended for want of a report
        (`outcome_inferred`) takes the report that comes late, judged the same way."""
        if status not in OUTCOMES:
            raise InvalidInput("status", status, f"is not an outcome (expected one of {OUTCOMES})")
        version_text = agent_text("version", version, MAX_VERSION_LENGTH)
        # The agent's words, kept, stored inert: an escape sequence or a NUL as its escape.
        error_text = agent_text("error", error, MAX_ERROR_LENGTH)
        reported = Outcome(
            status=status,
            version=version_text,
            error=error_text,
            reason=None if reason is None else OutcomeReason(reason).value,
            # A switch cannot have happened after the report arrived.
            switched_at=None if switched_at is None else min(switched_at, now),
            updater_version=agent_text("updater_version", updater_version, MAX_VERSION_LENGTH),
            delivery=None if delivery is None else delivery.kind,
            patch_fallback_reason=(
                None
                if delivery is None or delivery.fallback_reason is None
                else PatchFallbackReason(delivery.fallback_reason).value
            ),
        )
        with self._pool.connection() as conn:
            with conn.transaction():
                refusal = record_outcome(conn, agent_id, run_id, reported, now)
            if refusal is not None:
                # Committed first: the record says what happened, then the agent is told no.
                raise Conflict(
                    f"status: {status!r} is not recorded as an outcome: {refusal}; "
                    f"run {run_id} is recorded as unauthorised",
                    code=AnswerCode.OUTCOME_NOT_AUTHORISED,
                )
            return run_view(read_run(conn, run_id))

    def request_release_retry(self, agent_id: UUID, *, actor: Actor, now: datetime) -> ReleaseRetry:
        """From now on the agent's earlier rollbacks no longer make the pair's current release
        "nothing to do" for it (`claims.offered`); recorded with its actor."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE agents SET release_retry_at = %s WHERE id = %s AND deleted_at IS NULL"
                " RETURNING org_id",
                [now, agent_id],
            ).fetchone()
            if row is None:
                raise unknown_agent(agent_id)
            record_action(
                conn,
                kind="agent.release_retry_requested",
                actor=actor,
                at=now,
                org_id=row["org_id"],
                agent_id=agent_id,
            )
        return ReleaseRetry(agent_id=agent_id, requested_at=now)

    def confirm_swap(self, agent_id: UUID, run_id: UUID, now: datetime) -> SwapPermit:
        """The permit to switch now (asked immediately before the swap), or why not. Reads only:
        the one cheap call between a verified download and the switch."""
        with self._pool.connection() as conn:
            return swap_permit(read_lease(conn, agent_id, run_id), now)

    def request_manual_update(
        self,
        org_id: UUID,
        agent_id: UUID,
        requested_by: UUID | None,
        *,
        now: datetime,
        actor_kind: ActorKind = "user",
        person: tuple[UUID, str] | None = None,
    ) -> RecordedRun:
        """A person asked for an update now: a manual run the agent learns of from its config.
        `actor_kind` "agent" when the person asked on the host (`nachtwacht agent update-now`).
        `requested_by` is the credential that asked; a named person signed in as themselves
        asks with none, and the trail names them (`person`: their id and name)."""
        with self._pool.connection() as conn:
            require_agent(conn, org_id, agent_id)
            try:
                with conn.transaction():
                    run_id = _insert_manual_run(
                        conn,
                        org_id,
                        agent_id,
                        requested_by,
                        now=now,
                        actor_kind=actor_kind,
                        person=person,
                    )
            except psycopg.errors.UniqueViolation:
                pending = conn.execute(
                    "SELECT id FROM runs WHERE agent_id = %s AND trigger = 'manual'"
                    " AND status = 'requested'",
                    [agent_id],
                ).fetchone()
                assert pending is not None
                return RecordedRun(created=False, run=run_view(read_run(conn, pending["id"])))
            return RecordedRun(created=True, run=run_view(read_run(conn, run_id)))

    def request_manual_updates(
        self,
        org_id: UUID,
        agent_ids: Sequence[UUID],
        requested_by: UUID | None,
        *,
        now: datetime,
        person: tuple[UUID, str] | None = None,
    ) -> ManualRequests:
        """A person asked for an update now on each agent listed, in one transaction (all or
        none): a manual run and its `update.requested` each, as `request_manual_update` makes
        them; an agent with one already pending keeps it. Each is claimed as one agent's
        update now is (`claims.manual`): through the same stops and caps as a scheduled claim,
        so a whole organisation asked at once starts `org_cap` downloads a round."""
        with self._pool.connection() as conn, conn.transaction():
            wanted = require_agents(conn, org_id, agent_ids)
            # One statement for the runs and their events: an agent with a pending request is
            # skipped by the index that allows one (`runs_one_pending_manual`), even when a
            # request for it commits while this one runs.
            rows = conn.execute(
                "WITH asked AS ("
                " INSERT INTO runs (agent_id, org_id, trigger, status, requested_by, created_at)"
                " SELECT a.agent_id, %(org)s, 'manual', 'requested', %(by)s, %(now)s"
                " FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS a(agent_id, n) ORDER BY a.n"
                " ON CONFLICT (agent_id) WHERE trigger = 'manual' AND status = 'requested'"
                " DO NOTHING RETURNING id, agent_id)"
                " INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, actor_id,"
                " actor_name, at, data)"
                " SELECT %(org)s, asked.agent_id, asked.id, 'update.requested', 'user',"
                " %(actor_id)s, %(actor_name)s, %(now)s, '{}' FROM asked ORDER BY asked.agent_id"
                " RETURNING agent_id",
                {
                    "org": org_id,
                    "by": requested_by,
                    "now": now,
                    "ids": wanted,
                    "actor_id": requested_by if person is None else person[0],
                    "actor_name": None if person is None else person[1],
                },
            ).fetchall()
        created = len(rows)
        return ManualRequests(requested=created, pending=len(wanted) - created)

    def agent_runs(self, org_id: UUID, agent_id: UUID, limit: int = 50) -> RunList:
        with self._pool.connection() as conn:
            require_agent(conn, org_id, agent_id)
            return RunList(runs=latest_runs(conn, agent_id, limit))

    def outcomes_per_slot(self, *, since: datetime, until: datetime) -> NightOutcomes:
        """The platform's scheduled runs of the slots in [since, until), oldest slot first: per
        slot and status, and the missed ones per reason."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT slot_at, status, miss_reason, count(*) AS n FROM runs"
                " WHERE trigger = 'schedule' AND slot_at >= %s AND slot_at < %s"
                " GROUP BY slot_at, status, miss_reason ORDER BY slot_at, status, miss_reason",
                [since, until],
            ).fetchall()
        counts: dict[datetime, dict[str, int]] = {}
        missed: dict[datetime, dict[str, int]] = {}
        for row in rows:
            at = row["slot_at"]
            per_status = counts.setdefault(at, {})
            per_status[row["status"]] = per_status.get(row["status"], 0) + row["n"]
            per_reason = missed.setdefault(at, {})
            if row["miss_reason"] is not None:
                per_reason[row["miss_reason"]] = row["n"]
        return NightOutcomes(
            slots=tuple(
                SlotOutcomes(slot_at=at, counts=counts[at], missed_by_reason=missed[at])
                for at in counts
            )
        )

    def any_agent_runs(self, agent_id: UUID, limit: int = 50) -> RunList:
        """An operator's view of an agent's runs, a deleted agent's included (its history)."""
        with self._pool.connection() as conn:
            if conn.execute("SELECT 1 FROM agents WHERE id = %s", [agent_id]).fetchone() is None:
                raise unknown_agent(agent_id)
            return RunList(runs=latest_runs(conn, agent_id, limit))

    def operations(self, org_id: UUID, limit: int = 100) -> Operations:
        """The panel's task tray: operations a person started. Scheduled updates are not there."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {RUN_COLUMNS}, a.name AS agent_name, r.requested_by"  # noqa: S608 - constant columns
                " FROM runs r JOIN agents a ON a.id = r.agent_id"
                " LEFT JOIN releases rel ON rel.id = r.release_id"
                " WHERE r.org_id = %s AND r.trigger = 'manual'"
                " ORDER BY r.created_at DESC, r.id LIMIT %s",
                [org_id, limit],
            ).fetchall()
        return Operations(operations=tuple(operation_view(row) for row in rows))

    def artifact_for_download(self, agent_id: UUID, run_id: UUID, now: datetime) -> ArtifactInfo:
        """The artifact a run may download: only with its valid, unrevoked, unexpired token."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT t.revoked_at, t.revoked_reason, t.expires_at, rel.id AS release_id,"
                " rel.length, rel.sha256"
                " FROM runs r JOIN tokens t ON t.run_id = r.id JOIN releases rel"
                " ON rel.id = t.release_id WHERE r.id = %s AND r.agent_id = %s",
                [run_id, agent_id],
            ).fetchone()
        if row is None:
            raise NotFound(
                f"run {run_id} has no download for this agent", code=AnswerCode.RUN_NOT_FOUND
            )
        if row["revoked_at"] is not None:
            raise Forbidden(
                f"the token of run {run_id} was revoked ({row['revoked_reason'] or 'operator'})",
                code=AnswerCode.TOKEN_REVOKED,
            )
        if row["expires_at"] <= now:
            raise Forbidden(
                f"the token of run {run_id} expired at {format_instant(row['expires_at'])}",
                code=AnswerCode.TOKEN_EXPIRED,
            )
        return ArtifactInfo(
            release_id=row["release_id"], length=row["length"], sha256=row["sha256"]
        )

    def patch_for_download(
        self, agent_id: UUID, run_id: UUID, base: str, now: datetime
    ) -> ArtifactInfo:
        """A patch of the run's release from the build whose tar hash is `base`: the same token
        grants the artifact and each patch its signed manifest offers."""
        release = self.artifact_for_download(agent_id, run_id, now)
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT length, sha256 FROM release_patches"
                " WHERE release_id = %s AND base_tar_sha256 = %s",
                [release.release_id, base],
            ).fetchone()
        if row is None:
            raise NotFound(
                f"the release of run {run_id} has no patch from base {base[:16]}",
                code=AnswerCode.RUN_NOT_FOUND,
            )
        return ArtifactInfo(
            release_id=release.release_id, length=row["length"], sha256=row["sha256"]
        )
