"""The daemon's state file when the disk may be full: what a failed save must not lose or repeat.

`ClaimKeeper` is the daemon's only way to its state file. When the disk refuses a save, the state
it could not write is kept in memory and is the state the next minutes plan with — a slot it
consumed stays consumed (reported once, not every minute of its window), a claim keeps its
attempts, a run that ended is not carried on — and it is written as soon as the disk takes it.

What memory cannot give is crash safety: a claim that is not on disk is forgotten by a restart.
So the updater is handed only a claim whose run is on disk (`on_disk`); the dispatch waits for
the disk until the attempt bound or the window ends the run (`dispatch`). Before the dispatch
nothing has happened that a restart could repeat: claimed again, the slot gets the same grant.
"""

from __future__ import annotations

from agent_daemon.disk.daemon_state import ClaimInProgress, DaemonState, StateStore
from agent_daemon.host.event_log import EventLog

__all__ = ["ClaimKeeper"]


class ClaimKeeper:
    def __init__(self, *, state_store: StateStore, log: EventLog) -> None:
        self._store = state_store
        self._log = log
        # The newest state the disk refused, written at the next save or load that it takes.
        self._unsaved: DaemonState | None = None
        # The run of the claim the state file holds (None: none, or not read yet).
        self._claim_on_disk: str | None = None
        self._ended_runs: set[str] = set()
        # The disk's words when it last refused the state (None: the last save was written).
        self.last_write_error: str | None = None

    @property
    def ended_runs(self) -> frozenset[str]:
        """The runs this process ended, saved or not."""
        return frozenset(self._ended_runs)

    def load(self) -> DaemonState:
        """The daemon's state: the one the disk refused, if any (tried on the disk again), else
        the state file's."""
        unsaved = self._unsaved
        if unsaved is not None:
            self.save(unsaved)
            return unsaved
        state = self._store.load()
        self._claim_on_disk = None if state.claim is None else state.claim.run_id
        return state

    def save(self, state: DaemonState) -> bool:
        """Save the state; when the disk refuses, keep it in memory (see the module) and say so.
        True when it is on disk."""
        claim = state.claim
        try:
            self._store.save(state)
        except OSError as exc:
            self._unsaved = state
            self.last_write_error = f"{exc.filename or 'daemon state'}: {exc.strerror or exc}"
            self._log.emit(
                "state.write_failed",
                level="error",
                run_id=None if claim is None else claim.run_id,
                error=self.last_write_error,
                detail="the state is kept in memory and written once the disk takes it; "
                "reports are sent directly",
            )
            return False
        self._unsaved = None
        self.last_write_error = None
        self._claim_on_disk = None if claim is None else claim.run_id
        return True

    def on_disk(self, claim: ClaimInProgress) -> bool:
        """Whether the state file holds this claim's run: a restart would carry it on."""
        return self._claim_on_disk == claim.run_id

    def end(self, run_id: str) -> None:
        """The run ended: never carried on again, even when its end cannot be saved."""
        self._ended_runs.add(run_id)

    def live_claim(self, state: DaemonState) -> ClaimInProgress | None:
        """The claim to carry on: the state's, unless its run already ended in this process."""
        claim = state.claim
        if claim is None:
            return None
        if claim.run_id in self._ended_runs:
            self.save(state.model_copy(update={"claim": None}))
            return None
        return claim
