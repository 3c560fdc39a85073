"""The fleet as a whole, read in one query each: how many live agents run each version on each
(channel, platform), and the organisations' names (for the operators' screens, which otherwise
show ids).

An agent is placed on the pair it follows (`agent_tracks`, learnt from its config poll or
claim); an agent that has not asked yet is placed on the pair its version was published for
when exactly one pair published it; otherwise its pair is not known (None).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from control_plane.types import Pool

__all__ = [
    "PLACED_AGENTS",
    "FleetService",
    "FleetVersionCount",
    "FleetVersions",
    "OrgName",
    "OrgNames",
]


@dataclass(frozen=True, kw_only=True)
class FleetVersionCount:
    # None (both): the pair is not known.
    channel: str | None
    platform: str | None
    # None: the agent has reported no version yet.
    version: str | None
    agents: int


@dataclass(frozen=True, kw_only=True)
class FleetVersions:
    counts: tuple[FleetVersionCount, ...]


@dataclass(frozen=True, kw_only=True)
class OrgName:
    org_id: UUID
    name: str


@dataclass(frozen=True, kw_only=True)
class OrgNames:
    orgs: tuple[OrgName, ...]


# Every live agent placed on its pair, by the rule above (`placed`: version, channel, platform;
# the pair None when not known), as the first part of a WITH for a statement to go on from. The
# pair of each version published for exactly one pair is found once per version, not once per
# agent: most agents follow a pair and need none, and versions are few.
PLACED_AGENTS = """
WITH one_pair AS (
    SELECT agent_version AS version, min(channel) AS channel, min(platform) AS platform
      FROM releases
     GROUP BY agent_version
    HAVING count(DISTINCT (channel, platform)) = 1
), placed AS (
    SELECT a.current_version AS version,
           coalesce(t.channel, published.channel) AS channel,
           coalesce(t.platform, published.platform) AS platform
      FROM agents a
      LEFT JOIN agent_tracks t ON t.agent_id = a.id
      LEFT JOIN one_pair published
             ON t.agent_id IS NULL AND published.version = a.current_version
     WHERE a.deleted_at IS NULL
)"""

_FLEET_BY_VERSION = f"""{PLACED_AGENTS}
SELECT channel, platform, version, count(*) AS agents
  FROM placed
 GROUP BY channel, platform, version
 ORDER BY channel IS NULL, channel, platform, version NULLS LAST
"""  # noqa: S608 - constant fragments


class FleetService:
    """Read-only views over every organisation's agents (an operator's pictures)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def versions(self) -> FleetVersions:
        """Live agents per (channel, platform, version), in one query."""
        with self._pool.connection() as conn:
            rows = conn.execute(_FLEET_BY_VERSION).fetchall()
        return FleetVersions(counts=tuple(FleetVersionCount(**row) for row in rows))

    def org_names(self) -> OrgNames:
        """Every organisation's id and name, by name."""
        with self._pool.connection() as conn:
            rows = conn.execute("SELECT id, name FROM orgs ORDER BY name, id").fetchall()
        return OrgNames(orgs=tuple(OrgName(org_id=row["id"], name=row["name"]) for row in rows))
