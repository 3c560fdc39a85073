"""Where the fleet stands on the trust root: the newest root operators published, when it expires,
and how many live agents hold it, an older one, or none (still on their trusted-key files, or not
yet said). Read for `/metrics` and for the operators' main page.

Two reads whose cost does not grow with the roots' history: the newest root is the last entry of
the primary key's index, and the agents are counted in one pass over the agents table, by the
trust roots' own rule (`trust_roots.services.agents_by_held_root`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from control_plane.trust_roots.services import agents_by_held_root
from control_plane.types import Connection

__all__ = ["EXPIRY_WARNING", "NO_TRUST_ROOT", "TrustRootStanding", "read_trust_root_standing"]

# A root is replaced by a signing ceremony with offline keys, which takes days to arrange: a
# month's notice leaves time for it, and the operators' page warns from then on.
EXPIRY_WARNING = timedelta(days=30)


@dataclass(frozen=True, kw_only=True)
class TrustRootStanding:
    """The newest published root (all None while none is) and the live agents by the root they
    hold: `current` holds the newest (or a newer one it was enrolled with), `older` an earlier
    one, `none` no root at all."""

    version: int | None
    expires_at: datetime | None
    published_at: datetime | None
    agents_current: int
    agents_older: int
    agents_none: int

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def expires_soon(self, now: datetime) -> bool:
        """Expired, or expiring within the warning's span."""
        return self.expires_at is not None and self.expires_at - now <= EXPIRY_WARNING


# Before any root is published, and with no agent counted.
NO_TRUST_ROOT = TrustRootStanding(
    version=None,
    expires_at=None,
    published_at=None,
    agents_current=0,
    agents_older=0,
    agents_none=0,
)

_NEWEST_ROOT = """
SELECT version, expires_at, published_at FROM trust_roots ORDER BY version DESC LIMIT 1
"""


def read_trust_root_standing(conn: Connection) -> TrustRootStanding:
    newest = conn.execute(_NEWEST_ROOT).fetchone()
    version = newest["version"] if newest is not None else None
    agents = agents_by_held_root(conn).standing(version)
    return TrustRootStanding(
        version=version,
        expires_at=newest["expires_at"] if newest is not None else None,
        published_at=newest["published_at"] if newest is not None else None,
        agents_current=agents.current,
        agents_older=agents.older,
        agents_none=agents.none,
    )
