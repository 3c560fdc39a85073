"""The lock between the missed pass and an agent's report that it could not reach us.

The missed pass (`control_plane.reconcile.missed`) holds it exclusive while it reads and writes a
transaction's misses; a report of an unreachable control plane (`control_plane.runs.unreachable`)
holds it shared while it keeps the report and corrects an `offline` miss. So a report either
commits before the pass reads the reports, or waits until the pass's misses are committed and
corrects them: neither order leaves an `offline` behind. Reports never wait for each other.
"""

from __future__ import annotations

__all__ = ["MISSES_LOCK", "MISSES_LOCK_SHARED"]

MISSES_LOCK = "SELECT pg_advisory_xact_lock(hashtext('nachtwacht.missed_pass'))"
MISSES_LOCK_SHARED = "SELECT pg_advisory_xact_lock_shared(hashtext('nachtwacht.missed_pass'))"
