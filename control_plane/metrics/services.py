"""The figures behind `GET /metrics`: all their SQL (the trust root's in `trust_roots`).

Figures stored in the database are the platform's (every replica reports the same); figures kept
in memory (refused claim requests) are this replica's. No history table is counted per scrape:
runs' endings are counted as they happen (`run_ending_counts`, kept by a trigger on `runs`), and
tokens granted, notifications, claim refusals and webhook deliveries and attempts likewise
(`history_counts`, kept by statement triggers); the runs in flight are read through their partial
index. A scrape costs the same on the first day and after a year, and removing old rows lowers no
figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from control_plane.agent_config.services import STRETCH_GAP
from control_plane.agents.fleet import PLACED_AGENTS
from control_plane.claims.refusals import RefusalRecorder
from control_plane.liveness.clock_watch import ClockWatch
from control_plane.metrics.trust_roots import (
    NO_TRUST_ROOT,
    TrustRootStanding,
    read_trust_root_standing,
)
from control_plane.metrics.unavailable import UnavailableAnswers
from control_plane.retention.standing import RetentionStanding, read_standing
from control_plane.rollout.unverifiable import unverifiable_releases
from control_plane.trust_roots.services import unverifiable_under_newest
from control_plane.trust_roots.unverifiable import OfferedAs
from control_plane.types import Connection, Pool
from ground.contract import ENDED_BY_CONTROL_PLANE, MissReason, OutcomeReason

__all__ = [
    "OUTCOME_OF_STATUS",
    "UNVERIFIABLE_OFFERED_AS",
    "MetricsService",
    "MetricsSnapshot",
    "ReleaseOutcome",
    "ReleaseState",
    "outcome_of",
]

# How a release the newest trust root leaves unverifiable is offered; each shown from 0.
UNVERIFIABLE_OFFERED_AS: tuple[OfferedAs, ...] = ("current", "previous", "stored")

Counts = tuple[tuple[tuple[str, ...], int], ...]

# A run's status as the outcome of its release's update: a switch the control plane did not
# authorise, or one it refused, is `refused`; a run that never reached its release (missed,
# skipped) is no outcome of that release.
OUTCOME_OF_STATUS = {
    "succeeded": "succeeded",
    "up_to_date": "up_to_date",
    "failed": "failed",
    "rolled_back": "rolled_back",
    "unauthorised": "refused",
    "refused": "refused",
}


def outcome_of(status: str, reason: str) -> str:
    """The outcome a run's ending is counted as. An update the control plane stopped before its
    switch (its token revoked by the brake, a halt or a withdrawal; its window closed) is
    `refused`, not a failure of the build."""
    if status == "failed" and reason in ENDED_BY_CONTROL_PLANE:
        return "refused"
    return OUTCOME_OF_STATUS[status]


@dataclass(frozen=True, kw_only=True)
class ReleaseState:
    """A release `/metrics` shows: each pair's current one, and any halted or under its brake."""

    release_id: UUID
    channel: str
    platform: str
    version: str
    stage: str
    current: bool
    halted: bool
    braked: bool
    # The managed agent's release, or nachtwacht's own agent's (shown in families of its own).
    product: str = "agent"


# Each pair's current release and every release that is halted or braked (withdrawn ones aside).
_RELEASE_STATES = """
SELECT rel.id, rel.channel, rel.platform, rel.agent_version, rel.stage, rel.product,
       (EXISTS (SELECT 1 FROM current_releases cur WHERE cur.release_id = rel.id)
        OR EXISTS (SELECT 1 FROM current_updater_releases cur
                    WHERE cur.release_id = rel.id)) AS current,
       EXISTS (SELECT 1 FROM release_halts h
                WHERE h.release_id = rel.id AND h.resumed_at IS NULL) AS halted,
       rel.braked_at IS NOT NULL AS braked
  FROM releases rel
 WHERE rel.withdrawn_at IS NULL
   AND (rel.braked_at IS NOT NULL
        OR EXISTS (SELECT 1 FROM current_releases cur WHERE cur.release_id = rel.id)
        OR EXISTS (SELECT 1 FROM current_updater_releases cur WHERE cur.release_id = rel.id)
        OR EXISTS (SELECT 1 FROM release_halts h
                    WHERE h.release_id = rel.id AND h.resumed_at IS NULL))
 ORDER BY rel.channel, rel.platform, rel.manifest_version
"""


@dataclass(frozen=True, kw_only=True)
class ReleaseOutcome:
    """How many runs of one release ended with one outcome and reason (scheduled and manual)."""

    release_id: UUID
    channel: str
    platform: str
    version: str
    outcome: str
    reason: str
    count: int
    product: str = "agent"


# The releases whose outcomes and bytes served are shown: those `/metrics` shows the state of
# (current, halted, braked: their ids are the parameter) and those a live agent still runs, the
# release of its pair with its version (agents placed as the fleet view places them). The host
# reports nachtwacht's own agent by its version alone, so an updater release is in use when a live
# agent reports its version. A release nobody runs any more and nobody is offered drops out, so
# the scrape grows with the fleet's versions in use, not with every release ever published (a
# year of weekly releases would otherwise add a thousand series for good).
_RELEASES_IN_USE = f"""{PLACED_AGENTS}
SELECT rel.id FROM releases rel
 WHERE rel.id = ANY(%s)
    OR (rel.product = 'agent'
        AND (rel.channel, rel.platform, rel.agent_version) IN
            (SELECT channel, platform, version FROM placed))
    OR (rel.product = 'updater'
        AND rel.agent_version IN (SELECT uv.version FROM agent_updater_versions uv
                                    JOIN agents a ON a.id = uv.agent_id
                                   WHERE a.deleted_at IS NULL))
"""  # noqa: S608 - constant fragments

# The endings are counted as they happen (`run_ending_counts`, kept by a trigger on `runs`): a
# scrape reads the rows of the releases in use, never the runs themselves.
_RELEASE_OUTCOMES = """
SELECT rel.id, rel.channel, rel.platform, rel.agent_version, rel.product, c.status, c.reason,
       sum(c.n)::bigint AS n
  FROM releases rel JOIN run_ending_counts c ON c.release_id = rel.id
 WHERE rel.id = ANY(%s) AND c.status = ANY(%s)
 GROUP BY rel.id, c.status, c.reason
 ORDER BY rel.channel, rel.platform, rel.manifest_version, c.status, c.reason
"""


# Bytes of artifacts and patches served, by release and kind, for the releases in use (migration
# 0026's counts). By release id too, as the outcomes are: a version signed again for a rollback
# is another release.
_RELEASE_BYTES = """
SELECT rel.id::text AS release, rel.channel, rel.platform, rel.agent_version, b.kind, b.bytes AS n
  FROM releases rel JOIN release_bytes_served b ON b.release_id = rel.id
 WHERE rel.id = ANY(%s)
 ORDER BY rel.channel, rel.platform, rel.manifest_version, b.kind
"""


# Runs by trigger and status without reading the runs: the ended ones from their totals (kept
# over every release as they are counted, so a scrape reads the same few rows after years), the
# ones in flight (requested, claimed: a night's worth at most) through their partial index.
_RUNS = """
SELECT trigger, status, sum(n)::bigint AS n
  FROM (SELECT trigger, status, n FROM run_ending_totals
        UNION ALL
        SELECT trigger, status, 1 FROM runs WHERE status IN ('requested', 'claimed')) AS counted
 GROUP BY trigger, status
 ORDER BY trigger, status
"""


@dataclass(frozen=True, kw_only=True)
class MetricsSnapshot:
    """Everything `/metrics` shows, read at `now`. A `Counts` row is (label values, count)."""

    now: datetime
    replica: str
    granted: int
    refused_here: dict[str, int]
    dropped_here: int
    # This process's 503 `database_unavailable` answers by cause (`metrics.unavailable`).
    unavailable_here: dict[str, int] = field(default_factory=dict)
    # This process's clock minus the database server's at its last liveness mark (NaN: none yet,
    # or a fake clock): `control_plane.liveness.clock_watch`.
    clock_offset_seconds: float = math.nan
    refusal_facts: Counts  # (reason,)
    runs: Counts  # (trigger, status)
    missed: Counts  # (reason,)
    notifications: int
    deliveries: Counts  # (state,)
    attempts: Counts  # (outcome,)
    reconciled_until: datetime | None
    last_pass_at: datetime | None
    brake_engaged: bool = False
    releases: tuple[ReleaseState, ...] = ()
    release_outcomes: tuple[ReleaseOutcome, ...] = ()
    slot_endings: Counts = ()  # (status, reason) of scheduled runs, since they were counted
    halt_rate_percent: int | None = None
    trust_root: TrustRootStanding = NO_TRUST_ROOT
    # Live agents seen (a poll, a claim) within `STRETCH_GAP`: the panel's "online".
    agents_online: int = 0
    enrollments: Counts = ()  # (result,): hosts' exchanges of enrollment tokens, all replicas
    retention: RetentionStanding | None = None
    # (release, channel, platform, version, kind): artifact and patch bytes
    bytes_served: Counts = ()
    # (version,): live agents by the version of nachtwacht's own agent they reported, for the
    # versions in use only.
    updater_versions: Counts = ()
    # (reason,): runs that took the full build although a patch was offered, every reason
    patch_fallbacks: Counts = ()
    # (offered_as,): live releases signed by a key the newest trust root does not name, each
    # way of being offered from 0
    unverifiable: Counts = ()


def _history_counts(conn: Connection) -> dict[str, dict[str, int]]:
    """The figures counted as their rows were written (`history_counts`, kept by statement
    triggers): figure -> label -> count. A label with nothing counted yet has no row."""
    counted: dict[str, dict[str, int]] = {}
    for row in conn.execute("SELECT figure, label, n FROM history_counts"):
        counted.setdefault(row["figure"], {})[row["label"]] = int(row["n"])
    return counted


def _labelled(counted: dict[str, dict[str, int]], figure: str) -> Counts:
    """One figure's counts by label, in label order, leaving out labels at 0 (as a GROUP BY over
    the rows would)."""
    return tuple(((label,), n) for label, n in sorted(counted.get(figure, {}).items()) if n > 0)


def _counts(rows: list[dict[str, Any]], *labels: str) -> Counts:
    return tuple((tuple(str(row[label]) for label in labels), int(row["n"])) for row in rows)


class MetricsService:
    def __init__(
        self,
        pool: Pool,
        refusals: RefusalRecorder,
        replica: str,
        clock_watch: ClockWatch | None = None,
    ) -> None:
        self._pool = pool
        self._refusals = refusals
        self._replica = replica
        self._clock_watch = clock_watch or ClockWatch()
        # Counted by the app's answer to a database that is not there (`metrics.unavailable`).
        self.unavailable = UnavailableAnswers()

    def snapshot(self, now: datetime) -> MetricsSnapshot:
        with self._pool.connection() as conn:
            counted = _history_counts(conn)
            runs = conn.execute(_RUNS).fetchall()
            missed = conn.execute(
                "SELECT reason AS miss_reason, n FROM run_ending_totals"
                " WHERE trigger = 'schedule' AND status = 'missed' ORDER BY reason"
            ).fetchall()
            progress = conn.execute(
                "SELECT reconciled_until, last_pass_at FROM reconcile_progress"
            ).fetchone()
            brake = conn.execute("SELECT engaged FROM platform_brake").fetchone()
            releases = conn.execute(_RELEASE_STATES).fetchall()
            shown = [row["id"] for row in releases]
            in_use = [used["id"] for used in conn.execute(_RELEASES_IN_USE, [shown])]
            outcomes = conn.execute(_RELEASE_OUTCOMES, [in_use, list(OUTCOME_OF_STATUS)]).fetchall()
            endings = conn.execute(
                "SELECT status, reason, n FROM run_ending_totals"
                " WHERE trigger = 'schedule' ORDER BY status, reason"
            ).fetchall()
            threshold = conn.execute("SELECT halt_rate_percent FROM rollout_settings").fetchone()
            trust_root = read_trust_root_standing(conn)
            # Counted as they happen, one row per result (migration 0018).
            enrollments = conn.execute(
                "SELECT result, n FROM enrollment_counts ORDER BY result"
            ).fetchall()
            retention = read_standing(conn)
            served = conn.execute(_RELEASE_BYTES, [in_use]).fetchall()
            # Counted as each run's delivery is first recorded, one row per reason (0030).
            fallbacks = conn.execute(
                "SELECT reason, n FROM patch_fallback_counts ORDER BY reason"
            ).fetchall()
            # The agents table only: it grows with the fleet, not with history.
            online = conn.execute(
                "SELECT count(*)::bigint AS n FROM agents"
                " WHERE deleted_at IS NULL AND last_seen_at > %s",
                [now - STRETCH_GAP],
            ).fetchone()
            # The newest root (one row) and the releases not withdrawn: no history is read.
            unverifiable = unverifiable_under_newest(conn, unverifiable_releases).releases
            updater_versions = conn.execute(
                "SELECT uv.version AS updater_version, count(*)::bigint AS n"
                " FROM agent_updater_versions uv JOIN agents a ON a.id = uv.agent_id"
                " WHERE a.deleted_at IS NULL GROUP BY uv.version ORDER BY uv.version"
            ).fetchall()
        states = tuple(
            ReleaseState(
                release_id=row["id"],
                channel=row["channel"],
                platform=row["platform"],
                version=row["agent_version"],
                stage=row["stage"],
                current=row["current"],
                halted=row["halted"],
                braked=row["braked"],
                product=row["product"],
            )
            for row in releases
        )
        assert progress is not None, "migration 0005 inserts the progress row"
        return MetricsSnapshot(
            now=now,
            replica=self._replica,
            granted=sum(counted.get("tokens_granted", {}).values()),
            refused_here=self._refusals.refused_counts(),
            dropped_here=self._refusals.dropped,
            unavailable_here=self.unavailable.counts(),
            clock_offset_seconds=self._clock_watch.offset_seconds,
            refusal_facts=_labelled(counted, "claim_refusals"),
            runs=_counts(runs, "trigger", "status"),
            missed=_counts(missed, "miss_reason"),
            notifications=sum(counted.get("notifications", {}).values()),
            deliveries=_labelled(counted, "webhook_deliveries"),
            attempts=_labelled(counted, "webhook_attempts"),
            reconciled_until=progress["reconciled_until"],
            last_pass_at=progress["last_pass_at"],
            brake_engaged=brake is not None and brake["engaged"],
            releases=states,
            release_outcomes=_outcomes(outcomes, states),
            slot_endings=_with_every_miss_reason(_counts(endings, "status", "reason")),
            halt_rate_percent=threshold["halt_rate_percent"] if threshold else None,
            trust_root=trust_root,
            enrollments=_counts(enrollments, "result"),
            agents_online=0 if online is None else online["n"],
            retention=retention,
            bytes_served=_counts(served, "release", "channel", "platform", "agent_version", "kind"),
            updater_versions=_counts(updater_versions, "updater_version"),
            patch_fallbacks=_counts(fallbacks, "reason"),
            unverifiable=tuple(
                ((offered_as,), sum(1 for found in unverifiable if found.offered_as == offered_as))
                for offered_as in UNVERIFIABLE_OFFERED_AS
            ),
        )

    def trust_root_standing(self) -> TrustRootStanding:
        """The newest published trust root and the live agents by the root they hold."""
        with self._pool.connection() as conn:
            return read_trust_root_standing(conn)


# The series each release `/metrics` shows has from the start, at 0: Prometheus' `increase()`
# sees no rise in a series whose first sample is already 1, so an alert on the first failures of
# a release (or the first misses of a kind) needs the series to exist before they happen.
_SEEDED_OUTCOMES = [
    ("succeeded", ""),
    ("up_to_date", ""),
    *(
        (outcome, reason)
        for outcome in ("failed", "rolled_back", "refused")
        for reason in ["", *OutcomeReason]
    ),
]


def _with_every_miss_reason(endings: Counts) -> Counts:
    """The scheduled slots' endings, with a 0 for each miss reason none has had yet."""
    seen = {labels for labels, _ in endings}
    missing = [
        (("missed", reason.value), 0)
        for reason in MissReason
        if ("missed", reason.value) not in seen
    ]
    return tuple(sorted([*endings, *missing]))


def _outcomes(
    rows: list[dict[str, Any]], seeded: tuple[ReleaseState, ...]
) -> tuple[ReleaseOutcome, ...]:
    """One figure per (release, outcome, reason): `unauthorised` and `refused` runs add up; the
    releases `/metrics` shows the state of have every outcome from 0."""
    summed: dict[tuple[UUID, str, str], int] = {}
    facts: dict[UUID, dict[str, Any]] = {}
    for state in seeded:
        facts[state.release_id] = {
            "channel": state.channel,
            "platform": state.platform,
            "agent_version": state.version,
            "product": state.product,
        }
        for outcome, reason in _SEEDED_OUTCOMES:
            summed[(state.release_id, outcome, reason)] = 0
    for row in rows:
        key = (row["id"], outcome_of(row["status"], row["reason"]), row["reason"])
        summed[key] = summed.get(key, 0) + int(row["n"])
        facts[row["id"]] = row
    made = [
        ReleaseOutcome(
            release_id=release_id,
            channel=facts[release_id]["channel"],
            platform=facts[release_id]["platform"],
            version=facts[release_id]["agent_version"],
            outcome=outcome,
            reason=reason,
            count=count,
            product=facts[release_id]["product"],
        )
        for (release_id, outcome, reason), count in summed.items()
    ]
    return tuple(
        sorted(made, key=lambda o: (o.channel, o.platform, o.version, o.outcome, o.reason))
    )
