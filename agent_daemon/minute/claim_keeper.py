"""The daemon's state file when the disk may be full: what a failed save must not lose.

`ClaimKeeper` saves the daemon's state and, when the disk refuses, keeps the claim in memory (its
attempts and last failure still bound it) and the runs that ended though their end was not saved,
so a full or read-only state directory can neither lift the attempt bound nor carry on a run that
already ended.
"""

from __future__ import annotations

from agent_daemon.disk.daemon_state import ClaimInProgress, DaemonState, StateStore
from agent_daemon.host.event_log import EventLog

__all__ = ["ClaimKeeper"]


class ClaimKeeper:
    def __init__(self, *, state_store: StateStore, log: EventLog) -> None:
        self._store = state_store
        self._log = log
        self._claims_in_memory: dict[str, ClaimInProgress] = {}
        self._ended_runs: set[str] = set()

    @property
    def ended_runs(self) -> frozenset[str]:
        """The runs this process ended, saved or not."""
        return frozenset(self._ended_runs)

    def save(self, state: DaemonState) -> None:
        """Save the state; when the disk refuses, keep the claim in memory (its attempts and last
        failure still bound it) and carry on — the next save tries again."""
        claim = state.claim
        if claim is not None:
            self._claims_in_memory[claim.run_id] = claim
        try:
            self._store.save(state)
        except OSError as exc:
            self._log.emit(
                "state.write_failed",
                level="error",
                run_id=None if claim is None else claim.run_id,
                error=f"{exc.filename or 'daemon state'}: {exc.strerror or exc}",
                detail="the claim is kept in memory; reports are sent directly",
            )

    def end(self, run_id: str) -> None:
        """The run ended: never carried on again, even when its end cannot be saved."""
        self._ended_runs.add(run_id)
        self._claims_in_memory.pop(run_id, None)

    def live_claim(self, state: DaemonState) -> ClaimInProgress | None:
        """The claim to carry on: the state file's, unless its run already ended in memory (its
        end could not be saved), with what memory knows beyond the file (more attempts)."""
        claim = state.claim
        if claim is None:
            return None
        if claim.run_id in self._ended_runs:
            self.save(state.model_copy(update={"claim": None}))
            return None
        remembered = self._claims_in_memory.get(claim.run_id)
        if remembered is not None and remembered.attempts > claim.attempts:
            return remembered
        return claim
