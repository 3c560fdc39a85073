"""After a restore from a backup: what the control plane does before the fleet comes back.

A restored database is the past. It may have forgotten grants made after the backup (tokens an
agent holds that no row backs, caps counted short) and it may remember grants whose agents have
since switched or given up. `after_restore` makes the one safe assumption: no token outstanding
at the restore is good any more. It revokes them all (reason `restore`), so every download and
every swap on such a grant is refused from then on, exactly as after the brake's revocation; a
switch an agent made before the revocation is still recorded as the success it was. A run the
restored database does not know at all is refused by the existing rules: its artifact, its swap
permit and its outcome answer 404 `run_not_found`, so an agent never switches on a grant the
database forgot. The runs of revoked tokens end as every revoked run ends: with the agent's
report, or as interrupted by the reconcile worker once their window and lifetime are over.

It also empties the answers' change feed: its rows carry the old server's transaction ids,
which a new server hands out again. The step is idempotent and on the trail
(`platform.restored`).

It refuses, changing nothing, while sessions of serving replicas are connected to the database
(`control_plane.replica_sessions`): a database replicas serve from is live, not restored.

    services    `after_restore(pool, now, actor, even_with_replicas_connected)` -> `AfterRestore`
"""

from __future__ import annotations

from control_plane.restore.services import OVERRIDE_FLAG, AfterRestore, after_restore

__all__ = ["OVERRIDE_FLAG", "AfterRestore", "after_restore"]
