"""The bytes each organisation's next round of updates downloads, delta updates counted.

The per-organisation cap exists for the customer's uplink: at most `org_cap` downloads start in
one round (a minute). What a round costs that uplink is the bytes those downloads carry, and a
patch is a fraction of the full build. So, per organisation, for its next round — the first
slot of the agents it has waiting for an update whose window has not closed at `now`:

- the agents asking then that are offered a release they do not run (their kept offer,
  `control_plane.rollout.kept_offers`; not held, the release neither halted nor braked);
- how many of them the caps start in that round: the organisation's share of one round of both
  caps, with every other organisation asking at the same instant (`model.fair_shares`);
- the bytes: each agent takes the patch its release offers from the version the agent last
  reported (`agents.current_version`), else the full artifact. The control plane knows only
  that version, never the tar on the host's disk: a host whose base is missing or altered takes
  the full build instead (each such fallback is reported and counted), so the figure is the
  round's cost when every patch is used. Which agents the caps start first is whoever asks
  first; the expected bytes are the round's share of the waiting agents' bytes, rounded.

A patch counts only when it is stored with the release (it is what the control plane serves)
and the signed manifest names the version it is made from. Pure arithmetic below the one read
(`read_next_rounds`), so the panel's figure and a test's agree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from control_plane.forecast.model import fair_shares
from control_plane.forecast.schedule_slots import with_slots
from control_plane.rollout.kept_offers import refresh as refresh_kept_offers
from control_plane.settings.services import PlatformSettings
from control_plane.types import Connection
from shared_planner import parse_times, slots_on_day
from signed_release.manifest import parse_manifest

__all__ = [
    "OrgRound",
    "ReleaseSizes",
    "Waiting",
    "next_rounds",
    "read_next_rounds",
]


@dataclass(frozen=True, kw_only=True)
class ReleaseSizes:
    """What one release's download weighs: the artifact, and each stored patch by the version
    it is made from."""

    full: int
    patches: Mapping[str, int]

    def for_version(self, version: str | None) -> int:
        """The bytes an agent that reported `version` downloads (the patch, else the artifact)."""
        if version is None:
            return self.full
        return self.patches.get(version, self.full)


@dataclass(frozen=True, kw_only=True)
class Waiting:
    """Agents alike (organisation, slot, reported version, offered release), counted together."""

    org_id: UUID
    slot_at: datetime
    version: str | None
    release_id: UUID
    agents: int


@dataclass(frozen=True, kw_only=True)
class OrgRound:
    """One organisation's next round: when, how many agents wait and start, and the bytes."""

    org_id: UUID
    at: datetime
    # Agents asking at `at` that need an update; of them, how many the caps start in the round.
    agents: int
    starting: int
    # Of `agents`, how many have a patch from the version they reported.
    by_patch: int
    # The bytes the round is expected to download, and what the same agents' full builds weigh.
    expected_bytes: int
    full_bytes: int


def next_rounds(
    waiting: Iterable[Waiting], sizes: Mapping[UUID, ReleaseSizes], settings: PlatformSettings
) -> dict[UUID, OrgRound]:
    """Each organisation's next round, from the agents waiting for an update."""
    # instant -> org -> [(agents, bytes each, full bytes each)]
    per_instant: dict[datetime, dict[UUID, list[tuple[int, int, int]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for group in waiting:
        size = sizes.get(group.release_id)
        if size is None:
            continue
        per_instant[group.slot_at][group.org_id].append(
            (group.agents, size.for_version(group.version), size.full)
        )
    rounds: dict[UUID, OrgRound] = {}
    for at in sorted(per_instant):
        per_org = per_instant[at]
        shares = fair_shares(
            {org: sum(n for n, _, _ in groups) for org, groups in per_org.items()},
            org_cap=settings.org_cap,
            global_cap=settings.global_cap,
            window_minutes=1,
        )
        for org, groups in per_org.items():
            if org in rounds:
                continue  # an earlier instant is this organisation's next round
            agents = sum(n for n, _, _ in groups)
            starting = shares[org].can_update
            waiting_bytes = sum(n * each for n, each, _ in groups)
            full = sum(n * whole for n, _, whole in groups)
            rounds[org] = OrgRound(
                org_id=org,
                at=at,
                agents=agents,
                starting=starting,
                by_patch=sum(n for n, each, whole in groups if each < whole),
                expected_bytes=_share(waiting_bytes, starting, agents),
                full_bytes=_share(full, starting, agents),
            )
    return rounds


def _share(total: int, part: int, whole: int) -> int:
    """`total * part / whole`, rounded half up, in integers."""
    return (2 * total * part + whole) // (2 * whole) if whole else 0


# Every live scheduled agent offered a release it does not run, counted per (organisation,
# schedule, reported version, release); held agents and halted or braked releases left out.
_WAITING = """
SELECT ag.org_id, ag.update_schedule_times::text AS times, ag.current_version AS version,
       rel.id AS release_id, count(*) AS agents
  FROM agent_offers o
  JOIN agents ag ON ag.id = o.agent_id AND ag.deleted_at IS NULL
       AND ag.update_schedule_enabled AND jsonb_array_length(ag.update_schedule_times) > 0
  JOIN releases rel ON rel.id = o.release_id AND rel.braked_at IS NULL
       AND rel.agent_version IS DISTINCT FROM ag.current_version
  LEFT JOIN release_halts halt ON halt.release_id = rel.id AND halt.resumed_at IS NULL
  LEFT JOIN holds h ON h.agent_id = o.agent_id AND h.until > %(now)s
 WHERE h.agent_id IS NULL AND halt.id IS NULL
   AND (%(org)s::uuid IS NULL OR ag.org_id = %(org)s::uuid)
 GROUP BY 1, 2, 3, 4
"""

_SIZES = """
SELECT rel.id, rel.length, rel.manifest,
       coalesce(jsonb_object_agg(p.base_tar_sha256, p.length)
                FILTER (WHERE p.base_tar_sha256 IS NOT NULL), '{}') AS stored
  FROM releases rel LEFT JOIN release_patches p ON p.release_id = rel.id
 WHERE rel.id = ANY(%s)
 GROUP BY rel.id
"""


def read_next_rounds(
    conn: Connection, *, settings: PlatformSettings, now: datetime, org_id: UUID | None = None
) -> dict[UUID, OrgRound]:
    """Each organisation's next round at `now` (only `org_id`'s when given)."""
    refresh_kept_offers(conn)
    window = timedelta(minutes=settings.catch_up_minutes)
    today = now.astimezone(settings.zone).date()

    def next_slot(schedule: tuple[str, ...]) -> datetime | None:
        times = parse_times(schedule)
        upcoming = [
            slot.at
            for day in (today - timedelta(days=1), today, today + timedelta(days=1))
            for slot in slots_on_day(times, day, tz=settings.zone)
            if slot.at + window > now
        ]
        return min(upcoming, default=None)

    waiting = [
        Waiting(
            org_id=row["org_id"],
            slot_at=slot_at,
            version=row["version"],
            release_id=row["release_id"],
            agents=row["agents"],
        )
        for row, slot_at in with_slots(
            conn.execute(_WAITING, {"now": now, "org": org_id}), next_slot
        )
    ]
    return next_rounds(waiting, _read_sizes(conn, {w.release_id for w in waiting}), settings)


def _read_sizes(conn: Connection, release_ids: set[UUID]) -> dict[UUID, ReleaseSizes]:
    sizes: dict[UUID, ReleaseSizes] = {}
    for row in conn.execute(_SIZES, [list(release_ids)]).fetchall():
        stored: dict[str, int] = row["stored"]
        offers = parse_manifest(bytes(row["manifest"])).patches
        sizes[row["id"]] = ReleaseSizes(
            full=row["length"],
            patches={
                offer.base_version: stored[offer.base_tar_sha256]
                for offer in offers
                if offer.base_tar_sha256 in stored
            },
        )
    return sizes
