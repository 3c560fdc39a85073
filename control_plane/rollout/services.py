"""The rollout of each release: waves and stages, canaries, halts, the operators' inbox, forced
updates, each agent's offer, and the step the reconcile pass runs.

Every change is an event with its actor (`release.promoted`, `release.halted`, `release.resumed`,
`canary.marked`, `rollout.settings_changed`, `update.forced`); what the control plane does by
itself names the actor `control_plane` (`rollout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import tuple_row

from control_plane.agent_scope import agent_owner, org_of_agent, require_org
from control_plane.errors import NotFound
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import required_text
from control_plane.pins.holds import ActiveHold, hold_view
from control_plane.releases.release_actions import release_row
from control_plane.rollout.halts import (
    MAX_HALT_REASON_LENGTH,
    HaltView,
    OperatorNotice,
    halt_on_errors,
    halt_release,
    halts_of,
    resume_release,
)
from control_plane.rollout.kept_offers import refresh as refresh_kept_offers
from control_plane.rollout.offer import (
    OFFER_COLUMNS,
    OFFER_HALT,
    AgentFacts,
    OfferBasis,
    offers_from,
    read_facts_of,
)
from control_plane.rollout.stages import (
    RolloutSettings,
    Stage,
    StageChange,
    mark_canary,
    mark_canary_org,
    promote_release,
    promote_soaked,
    read_rollout_settings,
    update_rollout_settings,
)
from control_plane.rollout.waves import effective_wave
from control_plane.types import Connection, Pool
from ground.contract import HoldView, Instant, ReleaseTrack

__all__ = [
    "AgentRelease",
    "AgentReleaseList",
    "CanaryMark",
    "ForcedUpdate",
    "HaltList",
    "NoticeList",
    "OfferedRelease",
    "OrgCanaryMark",
    "PairRollout",
    "RolloutOverview",
    "RolloutService",
    "RolloutStep",
    "agent_release",
    "kept_release_views",
    "release_views",
    "rollout_overview",
]


@dataclass(frozen=True, kw_only=True)
class OfferedRelease:
    release_id: UUID
    version: str
    manifest_version: int
    stage: Stage
    # Claims of it are refused until a person resumes it (a halt) or releases its brake.
    halted: bool
    braked: bool
    # Why it is halted: `errors` (its failures passed the threshold) or `operator`; None when
    # it is not.
    halt_cause: str | None = None


@dataclass(frozen=True, kw_only=True)
class AgentRelease:
    """What the panel's API shows of one agent's release: its pair, what it is offered and why,
    what it runs, whether that is up to date, its pin and its hold."""

    agent_id: UUID
    track: ReleaseTrack
    # False: the agent has not polled or claimed yet; the pair shown is the default one.
    track_seen: bool
    offered: OfferedRelease | None
    basis: OfferBasis | None
    running_version: str | None
    up_to_date: bool
    pinned: bool
    # In the canary group of its pair's current release: marked, or in the release's share.
    canary: bool
    # Marked a canary by an operator (what the operator's checkbox shows and changes).
    canary_marked: bool
    hold: HoldView | None
    # The first wave of the pair's current release that reaches this agent (None: the pair has
    # no current release); it gets that release once the release is in this wave or later.
    wave: int | None = None
    # Its host's clock minus the control plane's, in seconds, and when it was measured, while the
    # latest poll that said its time was further off than the agent follows (`agent_clocks`):
    # its slots are missed meanwhile, the offer or not. None while the clock agrees.
    host_clock_offset_seconds: int | None = None
    host_clock_measured_at: Instant | None = None


@dataclass(frozen=True, kw_only=True)
class AgentReleaseList:
    agents: tuple[AgentRelease, ...]


@dataclass(frozen=True, kw_only=True)
class CanaryMark:
    agent_id: UUID
    canary: bool


@dataclass(frozen=True, kw_only=True)
class OrgCanaryMark:
    org_id: UUID
    canary: bool


@dataclass(frozen=True, kw_only=True)
class ForcedUpdate:
    run_id: UUID
    agent_id: UUID
    reason: str


@dataclass(frozen=True, kw_only=True)
class HaltList:
    halts: tuple[HaltView, ...]


@dataclass(frozen=True, kw_only=True)
class NoticeList:
    notices: tuple[OperatorNotice, ...]


@dataclass(frozen=True, kw_only=True)
class RolloutStep:
    halts: tuple[HaltView, ...]
    promotions: tuple[StageChange, ...]


@dataclass(frozen=True, kw_only=True)
class PairRollout:
    """One pair's current release and, among the agents last seen on the pair (polling or
    claiming), how many get it
    tonight at its stage (their schedule on, not held, not on it yet) and how many wait."""

    channel: str
    platform: str
    release_id: UUID
    version: str
    stage: Stage
    # The wave it is in, of `waves` (the last is everyone).
    wave: int
    waves: int
    halted: bool
    agents: int
    # Offered this release now and not running it: they update at their next slot.
    updating_at_this_stage: int
    # Waiting for the promotion (offered the previous release meanwhile).
    waiting_for_everyone: int
    # Running what they are offered (a pinned agent at its pin included).
    up_to_date: int
    pinned: int
    held: int


@dataclass(frozen=True, kw_only=True)
class RolloutOverview:
    settings: RolloutSettings
    pairs: tuple[PairRollout, ...]


def _offered_view(release: dict[str, Any]) -> OfferedRelease:
    return OfferedRelease(
        release_id=release["id"],
        version=release["agent_version"],
        manifest_version=release["manifest_version"],
        stage=release["stage"],
        halted=release["halted"],
        braked=release["braked"],
        halt_cause=release.get("halt_cause"),
    )


def release_views(
    conn: Connection, facts: Sequence[AgentFacts], now: datetime
) -> list[AgentRelease]:
    """Each agent's pair, offer, running version, pin, hold and wave, in the order of `facts`:
    a few queries for the whole list, whatever its length."""
    offers = offers_from(conn, facts, with_plan=True)
    clocks = _host_clocks(conn, [f.agent_id for f in facts])
    # The releases offered are few: one view of each, shared by the agents offered it.
    offered_views: dict[UUID, OfferedRelease] = {}
    views = []
    for f in facts:
        offer = offers.offers[f.agent_id]
        offered = None
        if offer.release is not None:
            offered = offered_views.get(offer.release["id"]) or offered_views.setdefault(
                offer.release["id"], _offered_view(offer.release)
            )
        hold = f.hold if f.hold is not None and f.hold.until > now else None
        views.append(
            AgentRelease(
                agent_id=f.agent_id,
                track=f.track,
                track_seen=f.seen is not None,
                offered=offered,
                basis=offer.basis,
                running_version=f.running,
                up_to_date=offer.release is None or offer.release["agent_version"] == f.running,
                pinned=offer.basis == "pinned",
                canary=f.marked or offer.basis == "canary",
                canary_marked=f.marked,
                hold=None if hold is None else hold_view(hold),
                wave=offers.wave_of(f, f.track),
                host_clock_offset_seconds=clocks.get(f.agent_id, (None, None))[0],
                host_clock_measured_at=clocks.get(f.agent_id, (None, None))[1],
            )
        )
    return views


def _host_clocks(conn: Connection, agent_ids: list[UUID]) -> dict[UUID, tuple[int, datetime]]:
    """The hosts' clocks kept off (`agent_clocks`) of the agents given: offset and instant."""
    if not agent_ids:
        return {}
    rows = conn.execute(
        "SELECT agent_id, offset_seconds, measured_at FROM agent_clocks"
        " WHERE agent_id = ANY(%s::uuid[])",
        [agent_ids],
    ).fetchall()
    return {row["agent_id"]: (row["offset_seconds"], row["measured_at"]) for row in rows}


# The kept offers (`control_plane.rollout.kept_offers`) with what the views read live beside
# them: whether the agent asked yet, what it runs, its canary mark, its hold, its host's clock.
_KEPT = """
SELECT o.agent_id, o.channel, o.platform, (t.agent_id IS NOT NULL) AS track_seen,
       o.release_id, o.basis, o.wave, ag.current_version AS running,
       (ca.agent_id IS NOT NULL) AS marked,
       h.until AS hold_until, h.reason AS hold_reason, h.set_by AS hold_set_by,
       clk.offset_seconds AS clock_offset, clk.measured_at AS clock_measured_at
  FROM agent_offers o
  JOIN agents ag ON ag.id = o.agent_id AND ag.deleted_at IS NULL
  LEFT JOIN agent_tracks t ON t.agent_id = o.agent_id
  LEFT JOIN canary_agents ca ON ca.agent_id = o.agent_id
  LEFT JOIN holds h ON h.agent_id = o.agent_id
  LEFT JOIN agent_clocks clk ON clk.agent_id = o.agent_id
"""
_OFFERED = f"""
SELECT {OFFER_COLUMNS} FROM releases rel {OFFER_HALT} WHERE rel.id = ANY(%s)
"""  # noqa: S608 - constant columns


def kept_release_views(
    conn: Connection, now: datetime, *, org_id: UUID | None = None
) -> list[AgentRelease]:
    """Every live agent's view (an organisation's, by name; else the fleet's), from the kept
    offers: what `release_views` answers for them, without computing a single offer unless a
    write made it stale."""
    refresh_kept_offers(conn)
    # Tuples, not dicts: at the fleet's size building a dict per row is most of the read.
    with conn.cursor(row_factory=tuple_row) as cursor:
        if org_id is None:
            rows = cursor.execute(_KEPT + " ORDER BY o.agent_id").fetchall()
        else:
            rows = cursor.execute(
                _KEPT + " WHERE ag.org_id = %s ORDER BY ag.name, ag.id", [org_id]
            ).fetchall()
    wanted = list({row[4] for row in rows if row[4] is not None})
    offered_views = {
        release["id"]: _offered_view(release)
        for release in (conn.execute(_OFFERED, [wanted]).fetchall() if wanted else [])
    }
    # The pairs are few: one track per pair, shared by its agents.
    tracks: dict[tuple[str, str], ReleaseTrack] = {}
    views = []
    for row in rows:
        agent_id, channel, platform, track_seen, release_id, basis, wave, running, marked = row[:9]
        until, reason, set_by, clock_offset, clock_measured_at = row[9:]
        track = tracks.get((channel, platform)) or tracks.setdefault(
            (channel, platform), ReleaseTrack(channel=channel, platform=platform)
        )
        offered = None if release_id is None else offered_views[release_id]
        hold = (
            None
            if until is None or until <= now
            else ActiveHold(until=until, reason=reason, set_by=set_by)
        )
        views.append(
            AgentRelease(
                agent_id=agent_id,
                track=track,
                track_seen=track_seen,
                offered=offered,
                basis=basis,
                running_version=running,
                up_to_date=offered is None or offered.version == running,
                pinned=basis == "pinned",
                canary=marked or basis == "canary",
                canary_marked=marked,
                hold=None if hold is None else hold_view(hold),
                wave=wave,
                host_clock_offset_seconds=clock_offset,
                host_clock_measured_at=clock_measured_at,
            )
        )
    return views


def agent_release(conn: Connection, agent_id: UUID, org_id: UUID, now: datetime) -> AgentRelease:
    """One agent's: `release_views` of a list of one."""
    return release_views(conn, read_facts_of(conn, [(agent_id, org_id)]), now)[0]


class RolloutService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    # -- settings and canaries ----------------------------------------------------------------

    def settings(self) -> RolloutSettings:
        with self._pool.connection() as conn:
            return read_rollout_settings(conn)

    def update_settings(
        self, changes: dict[str, Any], *, actor: Actor, now: datetime
    ) -> RolloutSettings:
        with self._pool.connection() as conn, conn.transaction():
            return update_rollout_settings(conn, changes, actor=actor, now=now)

    def mark_canary(
        self, agent_id: UUID, *, canary: bool, actor: Actor, now: datetime
    ) -> CanaryMark:
        with self._pool.connection() as conn, conn.transaction():
            state = mark_canary(conn, agent_id, canary=canary, actor=actor, now=now)
        return CanaryMark(agent_id=agent_id, canary=state)

    def mark_canary_org(
        self, org_id: UUID, *, canary: bool, actor: Actor, now: datetime
    ) -> OrgCanaryMark:
        with self._pool.connection() as conn, conn.transaction():
            state = mark_canary_org(conn, org_id, canary=canary, actor=actor, now=now)
        return OrgCanaryMark(org_id=org_id, canary=state)

    # -- stages and halts ---------------------------------------------------------------------

    def promote(
        self,
        release_id: UUID,
        *,
        reason: object,
        actor: Actor,
        now: datetime,
        to_wave: int | None = None,
    ) -> StageChange:
        """A person promotes a canary release now: to `to_wave`, else to `everyone`; the reason
        is required and kept in the `release.promoted` event, as for a halt or a resume."""
        reason_text = required_text(
            "reason", reason, MAX_HALT_REASON_LENGTH, required_to="promote a release (say why)"
        )
        with self._pool.connection() as conn, conn.transaction():
            return promote_release(
                conn, release_id, reason=reason_text, actor=actor, now=now, to_wave=to_wave
            )

    def halt(self, release_id: UUID, *, reason: object, actor: Actor, now: datetime) -> HaltView:
        with self._pool.connection() as conn, conn.transaction():
            return halt_release(
                conn, release_id, cause="operator", reason=reason, actor=actor, now=now
            )

    def resume(self, release_id: UUID, *, reason: object, actor: Actor, now: datetime) -> HaltView:
        with self._pool.connection() as conn, conn.transaction():
            return resume_release(conn, release_id, reason=reason, actor=actor, now=now)

    def halts(self, release_id: UUID) -> HaltList:
        with self._pool.connection() as conn:
            release_row(conn, release_id, "id")  # an unknown release is refused, not "no halts"
            return HaltList(halts=tuple(halts_of(conn, release_id)))

    def notices(self) -> NoticeList:
        """The operators' inbox, newest first."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, kind, created_at, body, read_at FROM operator_notices"
                " ORDER BY created_at DESC, id LIMIT 200"
            ).fetchall()
        return NoticeList(notices=tuple(OperatorNotice(**row) for row in rows))

    def mark_notice_read(self, notice_id: UUID, *, actor: Actor, now: datetime) -> OperatorNotice:
        """Mark one notice read, so the inbox's "N new" goes down; an event (`notice.read`)
        with its actor. Marking a notice read twice keeps the first instant and records
        nothing more."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE operator_notices SET read_at = %s WHERE id = %s AND read_at IS NULL"
                " RETURNING id, kind, created_at, body, read_at",
                [now, notice_id],
            ).fetchone()
            if row is not None:
                record_action(
                    conn,
                    kind="notice.read",
                    actor=actor,
                    at=now,
                    data={"notice_id": str(notice_id), "notice_kind": row["kind"]},
                )
                return OperatorNotice(**row)
            row = conn.execute(
                "SELECT id, kind, created_at, body, read_at FROM operator_notices WHERE id = %s",
                [notice_id],
            ).fetchone()
            if row is None:
                raise NotFound(f"notice {notice_id} does not exist", code="notice_not_found")
            return OperatorNotice(**row)

    def advance(self, now: datetime) -> RolloutStep:
        """The reconcile pass's step: halt what failed too often, then promote what soaked;
        then recompute the kept offers a write made stale (a promotion makes everyone's), so a
        reader of the fleet's views rarely waits for that."""
        with self._pool.connection() as conn:
            with conn.transaction():
                # One pass at a time across replicas (the worker's leader lock covers the pass;
                # this covers a direct call too).
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('nachtwacht.rollout_step'))")
                halts = halt_on_errors(conn, now)
                promotions = promote_soaked(conn, now)
            refresh_kept_offers(conn)
        return RolloutStep(halts=tuple(halts), promotions=tuple(promotions))

    # -- agents ---------------------------------------------------------------------------------

    def agent_release(self, agent_id: UUID, *, org_id: UUID | None, now: datetime) -> AgentRelease:
        """The agent's pair and offer; `org_id` scopes a customer's call (else a 404)."""
        with self._pool.connection() as conn:
            owner = agent_owner(conn, agent_id, org_id)
            return agent_release(conn, agent_id, owner, now)

    def org_agent_releases(
        self, org_id: UUID, *, now: datetime, agent_ids: Sequence[UUID] | None = None
    ) -> AgentReleaseList:
        """Every live agent of the organisation (or those of `agent_ids`, a page of a list) with
        its pair and offer, by name."""
        wanted = None if agent_ids is None else list(agent_ids)
        with self._pool.connection() as conn:
            require_org(conn, org_id)
            if wanted is None:
                return AgentReleaseList(agents=tuple(kept_release_views(conn, now, org_id=org_id)))
            order = conn.execute(
                "SELECT id FROM agents WHERE org_id = %s AND deleted_at IS NULL"
                " AND id = ANY(%s::uuid[]) ORDER BY name, id",
                [org_id, wanted],
            ).fetchall()
            facts = read_facts_of(conn, [(row["id"], org_id) for row in order])
            return AgentReleaseList(agents=tuple(release_views(conn, facts, now)))

    def force_update(
        self, agent_id: UUID, *, reason: object, actor: Actor, now: datetime
    ) -> ForcedUpdate:
        """An operator's manual update that goes through the brake and any halt (recorded as
        forced, with the reason)."""
        reason_text = required_text(
            "reason", reason, MAX_HALT_REASON_LENGTH, required_to="force an update (say why)"
        )
        with self._pool.connection() as conn, conn.transaction():
            owner = org_of_agent(conn, agent_id)
            # The update a person already asked for (refused under the brake) is the one
            # forced; else a new manual update. At most one is pending (runs_one_pending_manual).
            run = (
                conn.execute(
                    "SELECT id FROM runs WHERE agent_id = %s AND trigger = 'manual'"
                    " AND status = 'requested' FOR UPDATE",
                    [agent_id],
                ).fetchone()
                or conn.execute(
                    "INSERT INTO runs (agent_id, org_id, trigger, status, created_at)"
                    " VALUES (%s, %s, 'manual', 'requested', %s) RETURNING id",
                    [agent_id, owner, now],
                ).fetchone()
            )
            assert run is not None
            conn.execute(
                "INSERT INTO forced_updates (run_id, reason, forced_at, forced_by)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET"
                " reason = EXCLUDED.reason, forced_at = EXCLUDED.forced_at,"
                " forced_by = EXCLUDED.forced_by",
                [run["id"], reason_text, now, actor.name or actor.kind],
            )
            record_action(
                conn,
                kind="update.forced",
                actor=actor,
                at=now,
                org_id=owner,
                agent_id=agent_id,
                data={"run_id": str(run["id"]), "reason": reason_text},
            )
        return ForcedUpdate(run_id=run["id"], agent_id=agent_id, reason=reason_text)

    # -- the forecast ---------------------------------------------------------------------------

    def overview(self, now: datetime) -> RolloutOverview:
        """Per pair's current release: how many of the pair's agents get it tonight at its stage,
        how many wait for `everyone`, how many are up to date, pinned or held."""
        with self._pool.connection() as conn:
            return rollout_overview(conn, now)


# The agents last seen on a pair (polling or claiming), grouped by what the overview counts
# them by, from the kept offers: a few rows whatever the fleet's size.
_OVERVIEW_GROUPS = """
SELECT o.channel, o.platform, o.release_id, o.basis, ag.update_schedule_enabled AS schedule_on,
       coalesce(o.release_id IS NULL OR rel.agent_version = ag.current_version, false)
           AS up_to_date,
       coalesce(h.until > %(now)s, false) AS held, count(*) AS agents
  FROM agent_offers o
  JOIN agents ag ON ag.id = o.agent_id AND ag.deleted_at IS NULL
  JOIN agent_tracks t ON t.agent_id = o.agent_id
  LEFT JOIN releases rel ON rel.id = o.release_id
  LEFT JOIN holds h ON h.agent_id = o.agent_id
 GROUP BY 1, 2, 3, 4, 5, 6, 7
"""


def rollout_overview(conn: Connection, now: datetime) -> RolloutOverview:
    """The rollout's counts (`RolloutService.overview`) from the kept offers, in the caller's
    connection."""
    refresh_kept_offers(conn)
    settings = read_rollout_settings(conn)
    pairs = conn.execute(
        "SELECT cur.channel, cur.platform, rel.id, rel.agent_version, rel.stage, rel.wave,"
        " EXISTS (SELECT 1 FROM release_halts h WHERE h.release_id = rel.id"
        "   AND h.resumed_at IS NULL) AS halted"
        " FROM current_releases cur JOIN releases rel ON rel.id = cur.release_id"
        " ORDER BY cur.channel, cur.platform"
    ).fetchall()
    by_pair: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for group in conn.execute(_OVERVIEW_GROUPS, {"now": now}).fetchall():
        by_pair.setdefault((group["channel"], group["platform"]), []).append(group)
    result = []
    for pair in pairs:
        groups = by_pair.get((pair["channel"], pair["platform"]), [])
        counts = dict.fromkeys(("updating", "waiting", "up_to_date", "pinned", "held"), 0)
        for group in groups:
            n = group["agents"]
            counts["pinned"] += n if group["basis"] == "pinned" else 0
            if group["up_to_date"]:
                counts["up_to_date"] += n
            elif group["held"]:
                counts["held"] += n
            elif group["release_id"] == pair["id"]:
                counts["updating"] += n if group["schedule_on"] and not pair["halted"] else 0
            elif group["basis"] == "previous" or group["release_id"] is not None:
                counts["waiting"] += n
        result.append(
            PairRollout(
                channel=pair["channel"],
                platform=pair["platform"],
                release_id=pair["id"],
                version=pair["agent_version"],
                stage=pair["stage"],
                wave=effective_wave(pair["stage"], pair["wave"], len(settings.waves)),
                waves=len(settings.waves),
                halted=pair["halted"],
                agents=sum(group["agents"] for group in groups),
                updating_at_this_stage=counts["updating"],
                waiting_for_everyone=counts["waiting"] if pair["stage"] == "canary" else 0,
                up_to_date=counts["up_to_date"],
                pinned=counts["pinned"],
                held=counts["held"],
            )
        )
    return RolloutOverview(settings=settings, pairs=tuple(result))
