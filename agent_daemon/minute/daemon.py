"""One minute of the agent, carried out: the executor of `agent_daemon.minute.decision.decide`.

`decide` holds the five steps (which of them consumes the slot); this module does what each of its
actions asks and feeds what it found back, until the action is final. Its parts, each a module:
the reach (`config_sync`) and the trust root it announces (`trust_root_follow`), the dispatch of
a granted claim through the updater and the settling of what the updater holds with no claim
behind it (`dispatch`), the state file when the disk may be full (`claim_keeper`), the reports
through the outbox (`reporting`) and the log lines that need words (`daemon_lines`). What stays
here: start, the minute, the claim, and the final actions that need no updater (nothing to do, a
slot gone, a manual run refused, a new claim recorded).

The clock is read once per minute, right after the reach: that answer is what teaches the
`ServerClock` the control plane's time, so the instant a slot is planned on is the one recorded.

Every report goes through the on-disk outbox first, so none is lost to a crash or an outage. A
claim in the state file is finished before anything new is planned: a daemon restarted in the
middle of any step continues from there and never claims or installs the same slot twice. Under
faults a claimed update finishes inside its window or not at all (`dispatch`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from pydantic import ValidationError

from agent_daemon.connection.config_cache import ConfigCache
from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.outbox import Outbox
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import (
    ClaimInProgress,
    ConsumedSlot,
    DaemonState,
    RunRecord,
    StateStore,
)
from agent_daemon.disk.unreachable_file import (
    UNREACHABLE_FILE_NAME,
    UnreachableSlots,
    UnreachableSlotsFile,
)
from agent_daemon.errors import (
    AgentError,
    ControlPlaneUnreachable,
    DaemonStateError,
    describe_validation_error,
)
from agent_daemon.host.event_log import EventLog
from agent_daemon.minute.claim_keeper import ClaimKeeper
from agent_daemon.minute.claim_window import claim_deadline, claim_is_open
from agent_daemon.minute.config_sync import ConfigSync, Reached
from agent_daemon.minute.daemon_lines import error_fields, log_wait, slot_gone_meaning
from agent_daemon.minute.decision import (
    Action,
    AgentFacts,
    Answer,
    ClaimAnswer,
    ClaimManual,
    ClaimRequestAction,
    ClaimSlot,
    EndManual,
    GiveUpSlot,
    Granted,
    NothingToDo,
    Refused,
    ResumeClaim,
    StartUpdate,
    TickResult,
    Unreachable,
    Wait,
    decide,
)
from agent_daemon.minute.dispatch import Dispatcher, SelfUpdatePort, UpdaterPort
from agent_daemon.minute.own_switch import switch_outcome
from agent_daemon.minute.reporting import ReportSender
from agent_daemon.minute.trust_root_follow import TrustRootFollower
from agent_daemon.minute.unreachable_slots import (
    UNREACHABLE_CONTRACT,
    note_unreachable,
    report_of,
    still_reportable,
)
from agent_daemon.self_update.pending_switch import SelfUpdateCheckIn, SwitchRun
from ground.contract import AgentConfig, ClaimGrant, ClaimRequest, format_instant
from ground.contract.plain_text import clipped, shown
from ground.limits import DEFAULT_CATCH_UP_MINUTES
from shared_planner import Slot, due_slot

__all__ = ["Daemon"]

# The facts of a minute whose only use is the log line of an unreachable control plane.
_NO_FACTS = AgentFacts(last_consumed_at=None, installed_version=None)


class Daemon:
    def __init__(
        self,
        *,
        control: ControlPlaneClient,
        updater: UpdaterPort,
        state_store: StateStore,
        config_cache: ConfigCache,
        outbox: Outbox,
        server_clock: ServerClock,
        log: EventLog,
        stop_requested: Callable[[], bool] = lambda: False,
        trust_roots: TrustRootFollower | None = None,
        self_update: SelfUpdatePort | None = None,
        check_in: SelfUpdateCheckIn | None = None,
    ) -> None:
        self._control = control
        self._self_update = self_update
        self._check_in = check_in
        # The updater version sent with claims and reports: only to a control plane whose
        # contract reads it (an older one refuses a field it does not know).
        self._updater_version: str | None = None
        self._roots = trust_roots
        self._updater = updater
        self._unreachable = UnreachableSlotsFile(state_store.path.parent / UNREACHABLE_FILE_NAME)
        self._reports = ReportSender(outbox=outbox, control=control, log=log, now=server_clock.now)
        self._clock = server_clock
        self._log = log
        self._stop_requested = stop_requested
        self._sync = ConfigSync(
            control=control, config_cache=config_cache, server_clock=server_clock, log=log
        )
        self._keeper = ClaimKeeper(state_store=state_store, log=log)
        self._dispatcher = Dispatcher(
            control=control,
            updater=updater,
            keeper=self._keeper,
            reports=self._reports,
            server_clock=server_clock,
            log=log,
            stop_requested=stop_requested,
            self_update=self_update,
        )

    # -- the shell's entry points -------------------------------------------------------------

    def start(self) -> None:
        """Before the first minute: let the updater finish or undo what a crash interrupted.
        Never raises: what cannot be done now is one log line, and the minutes try again."""
        try:
            self._start()
        except (OSError, AgentError) as exc:
            self._log.emit("daemon.start_incomplete", level="error", **error_fields(exc))

    def _start(self) -> None:
        self._sync.load_cached()
        # First: a claim whose run a switch of the updater's own build took over ends with that
        # switch (`_report_own_switch`), never with its window, which would report it a second
        # time as "nothing was switched".
        state = self._report_own_switch(self._keeper.load())
        claim = self._keeper.live_claim(state)
        now = self._clock.now()
        if claim is None:
            self._dispatcher.settle_orphan(state)
        elif not claim_is_open(claim, now):
            # Stopped or killed inside the update, started after its window: never switched now.
            self._dispatcher.end_after_window(state, claim, now)
        else:
            # Inside its window the first minute carries it on, confirming before any switch.
            self._log.emit(
                "update.pending",
                slot_key=claim.slot_key,
                run_id=claim.run_id,
                window_closes_at=format_instant(claim_deadline(claim)),
            )

    def tick(self) -> TickResult:
        """One minute's work. Never raises: a failure is one log line and a retry next minute."""
        try:
            return self._tick()
        except (OSError, AgentError) as exc:
            self._log.emit("tick.failed", level="error", **error_fields(exc))
        except Exception as exc:
            # A bug must cost one minute and one line, not the daemon.
            self._log.emit("tick.crashed", level="error", **error_fields(exc))
        return "error"

    # -- the minute: decide, do, feed back ----------------------------------------------------

    def _tick(self) -> TickResult:
        # First, and with no network: after a rollback the claim of the switch is settled here,
        # never carried on by the build the guard restored.
        state = self._report_own_switch(self._keeper.load())
        claim = self._keeper.live_claim(state)
        state = state.model_copy(update={"claim": claim})
        roots = self._roots
        reached = self._sync.reach(
            trust_root_version=None if roots is None else roots.held_version()
        )
        now = self._clock.now()
        self._sync.check_clock(now)
        if claim is None:
            self._dispatcher.settle_orphan(state)
        config: AgentConfig | None = None
        answer: Answer = None
        if isinstance(reached, Reached):
            self._sync.remember(reached, now)
            if self._commit_own_build(now):
                state = self._report_own_switch(state)
                claim = state.claim
            if roots is not None:
                # Before anything is planned: an offer is verified with the newest root.
                roots.follow(reached.config.trust_root_version)
            # The contract this answer speaks, before the outbox is sent: a report says only
            # what it knows, and waits for a control plane that takes it.
            self._reports.control_plane_contract = reached.config.contract_version
            self._report_unreachable(reached.config, now)
            self._reports.flush()
            config = reached.config
        else:
            answer = reached
            if claim is not None and isinstance(reached, Unreachable):
                # The claim already holds the slot: carry it on while the control plane is down
                # (its partial download resumes as soon as it can, and its window still ends it).
                waited = decide(_NO_FACTS, None, reached, now)
                assert isinstance(waited, Wait), "an unreachable control plane is a wait"
                log_wait(self._log, waited)
                return self._dispatcher.dispatch(state, claim, now)
        running_updater = None if self._self_update is None else self._self_update.running_version()
        speaks_updater = (
            config is not None
            and config.contract_version is not None
            and config.contract_version >= UPDATER_CONTRACT
        )
        self._updater_version = running_updater if speaks_updater else None
        self._reports.updater_version = self._updater_version
        self._reports.control_plane_contract = None if config is None else config.contract_version
        facts = AgentFacts(
            last_consumed_at=state.last_consumed_at,
            installed_version=self._updater.installed_version(),
            floor=self._updater.accepted_floor(now),
            claim_in_progress=state.claim is not None,
            handled_manual_runs=frozenset(state.handled_manual_runs),
            updater_version=self._updater_version,
            updater_floor=None
            if self._self_update is None
            else self._self_update.accepted_floor(now),
            clock_off=self._clock.disagreement is not None,
        )
        action = decide(facts, config, answer, now)
        while isinstance(action, ClaimSlot | ClaimManual):
            if self._stop_requested():
                return "parked"
            action = decide(facts, config, self._claim(action), now)
        if isinstance(action, Wait) and action.reason == "offline" and not facts.clock_off:
            # On a clock off beyond the bound the slot planned is another day's: noted, it would
            # be refused and set aside (as online, no slot is claimed on it: `decide`).
            self._note_unreachable(action, state.last_consumed_at, now)
        return self._carry_out(action, state, now, config)

    # -- a slot's window while the control plane cannot be reached (`unreachable_slots`) -------

    def _note_unreachable(
        self, waited: Wait, last_consumed_at: datetime | None, now: datetime
    ) -> None:
        """This minute could not reach the control plane: note the slot it was due to claim (the
        unanswered claim's, else the one the cached config plans), if any."""
        request = waited.request
        slot: Slot | None = None
        if isinstance(request, ClaimSlot):
            slot = request.slot
        elif request is None:
            slot = self._due_from_cache(last_consumed_at, now)
        if slot is None:
            return
        noted, first = note_unreachable(
            self._read_unreachable(), slot, waited.error or "no answer", now
        )
        self._save_unreachable(noted)
        if first:
            self._log.emit(
                "slot.unreachable",
                level="warning",
                slot_key=slot.key,
                error=waited.error,
                detail="the agent is running but cannot reach the control plane inside this "
                "slot's window: check the host's proxy, firewall and DNS, or the control plane's "
                "status page; the control plane is told once it can be reached",
            )

    def _due_from_cache(self, last_consumed_at: datetime | None, now: datetime) -> Slot | None:
        config = self._sync.cached_config
        if config is None or not config.schedule.enabled:
            return None
        return due_slot(
            config.schedule.times,
            now=now,
            tz=config.timezone,
            last_consumed=last_consumed_at,
            catch_up=timedelta(minutes=config.catch_up_minutes),
        )

    def _report_unreachable(self, config: AgentConfig, now: datetime) -> None:
        """Reached again: each slot noted while the control plane could not be reached goes to
        the outbox, and out of the file — to a control plane that takes such reports."""
        contract = config.contract_version
        if contract is None or contract < UNREACHABLE_CONTRACT:
            return
        noted = self._read_unreachable()
        if not noted.slots:
            return
        for slot in still_reportable(noted, now):
            try:
                report = report_of(slot)
            except ValidationError as exc:
                # A slot the contract refuses (its file damaged on disk): one line, never a
                # minute that fails on it again and again.
                self._log.emit(
                    "unreachable_slots.unreportable",
                    level="warning",
                    slot_key=clipped(shown(slot.slot_key), 64),
                    error=describe_validation_error(exc, "unreachable slot"),
                )
                continue
            self._reports.queue_unreachable(report)
        self._save_unreachable(UnreachableSlots())

    def _read_unreachable(self) -> UnreachableSlots:
        try:
            return self._unreachable.load()
        except DaemonStateError as exc:
            # Nothing depends on it but the reason a miss is given: start it afresh (the file
            # replaced, so the damage is said once, not every minute).
            self._log.emit("unreachable_slots.unreadable", level="warning", error=str(exc))
            self._save_unreachable(UnreachableSlots())
            return UnreachableSlots()

    def _save_unreachable(self, noted: UnreachableSlots) -> None:
        try:
            self._unreachable.save(noted)
        except OSError as exc:
            self._log.emit("unreachable_slots.write_failed", level="warning", **error_fields(exc))

    def _commit_own_build(self, now: datetime) -> bool:
        """A switch to this build of the updater counts once it has polled (just now) and written
        its state file (here): until then the guard may still take it back. True when it was
        committed now."""
        check_in = self._check_in
        if check_in is None or not check_in.awaits_commit():
            return False
        if not self._keeper.save(self._keeper.load()):
            return False  # not written: the check-in waits for a minute whose save the disk takes
        committed = check_in.commit(now)
        if committed is None:
            return False
        self._log.emit("self_update.committed", version=committed.running_version)
        return True

    def _accept_own_release(self, run: SwitchRun) -> None:
        if self._self_update is None:
            return
        try:
            self._self_update.accept(run)
        except (OSError, AgentError) as exc:
            # The floor is a defence in depth (the control plane offers no older release): a
            # failure to raise it must not hold the report back.
            self._log.emit("self_update.floor_unsaved", level="warning", **error_fields(exc))

    def _report_own_switch(self, state: DaemonState) -> DaemonState:
        """What became of the last switch of the updater's build, reported for its run through
        the outbox and only then cleared (a crash in between reports it again: the control plane
        takes the same outcome twice as once). A claim of that run still in the state file (the
        daemon was killed between the switch and saving its end) ends with it."""
        check_in = self._check_in
        if check_in is None:
            return state
        try:
            report = check_in.report()
            switching = check_in.switching_run() if report is None else None
        except AgentError as exc:
            self._log.emit("self_update.unreadable", level="warning", **error_fields(exc))
            return state
        claim = state.claim
        if switching is not None and claim is not None and claim.run_id == switching:
            # Killed between the switch and saving the claim's end: end it now, unreported.
            self._keeper.end(claim.run_id)
            state = state.model_copy(update={"claim": None})
            self._keeper.save(state)
            return state
        if report is None:
            return state
        outcome = switch_outcome(report)
        if outcome is None:
            # A switch made by hand: no run to report; its outcome stays for `self-update
            # status` until the next switch.
            return state
        if outcome.status == "succeeded" and report.run is not None:
            # Before the report: a replay of an older release of the updater is refused from
            # here on, also after a restart.
            self._accept_own_release(report.run)
        # The run's claim, when the daemon was killed before it saved the claim's end.
        ended = claim if claim is not None and claim.run_id == outcome.run_id else None
        slot_key = None if ended is None else ended.slot_key
        self._reports.queue_outcome(slot_key=slot_key, outcome=outcome)
        record = RunRecord(
            at=self._clock.now(),
            trigger="schedule" if ended is None else ended.trigger,
            slot_key=slot_key,
            run_id=outcome.run_id,
            status=outcome.status,
            version=outcome.version,
            error=outcome.error,
            reason=None if outcome.reason is None else outcome.reason.value,
        )
        if ended is not None:
            self._keeper.end(outcome.run_id)
            state = state.model_copy(update={"claim": None})
        state = state.with_run(record)
        self._keeper.save(state)
        self._log.emit(
            "self_update.reported",
            level="info" if outcome.status == "succeeded" else "warning",
            run_id=outcome.run_id,
            status=outcome.status,
            version=outcome.version,
            error=outcome.error,
        )
        check_in.clear()
        return state

    def _carry_out(
        self, action: Action, state: DaemonState, now: datetime, config: AgentConfig | None
    ) -> TickResult:
        if isinstance(action, Wait):
            return log_wait(self._log, action)
        if isinstance(action, ResumeClaim):
            assert state.claim is not None, "decide resumes only a claim the state holds"
            return self._dispatcher.dispatch(state, state.claim, now)
        if isinstance(action, NothingToDo):
            return self._nothing_to_do(state, action, now)
        if isinstance(action, GiveUpSlot):
            return self._give_up_slot(state, action, now)
        if isinstance(action, EndManual):
            return self._end_manual(state, action, now)
        if isinstance(action, StartUpdate):
            return self._start_update(state, action, now, config)
        raise AssertionError(f"decide returned {action!r}, which is not final")

    def _claim(self, action: ClaimRequestAction) -> ClaimAnswer:
        if isinstance(action, ClaimSlot):
            request = ClaimRequest(
                slot_key=action.slot.key,
                from_version=action.from_version,
                product=action.product,
                updater_version=self._updater_version,
            )
        else:
            request = ClaimRequest(
                manual_run_id=action.run_id,  # type: ignore[arg-type]  # pydantic parses the UUID
                from_version=action.from_version,
            )
        try:
            answer = self._control.claim(request)
        except ControlPlaneUnreachable as exc:
            return Unreachable(error=str(exc), request=action, platform=exc.status is not None)
        if isinstance(answer, ClaimGrant):
            return Granted(request=action, grant=answer)
        return Refused(request=action, detail=answer)

    # -- the final actions that need no updater ---------------------------------------------

    def _nothing_to_do(self, state: DaemonState, action: NothingToDo, now: datetime) -> TickResult:
        slot = action.slot
        self._reports.queue_up_to_date(slot_key=slot.key, installed=action.version)
        record = RunRecord(
            at=now,
            trigger="schedule",
            slot_key=slot.key,
            run_id=None,
            status="up_to_date",
            version=action.version,
        )
        self._keeper.save(state.consume(_consumed(slot)).with_run(record))
        self._log.emit("slot.up_to_date", slot_key=slot.key, version=action.version)
        self._reports.flush()
        return "up_to_date"

    def _give_up_slot(self, state: DaemonState, action: GiveUpSlot, now: datetime) -> TickResult:
        slot = action.slot
        record = RunRecord(
            at=now,
            trigger="schedule",
            slot_key=slot.key,
            run_id=None,
            status=action.refusal.value,
            version=action.from_version,
            error=action.detail.message,
        )
        self._keeper.save(state.consume(_consumed(slot)).with_run(record))
        self._log.emit(
            "claim.slot_gone",
            slot_key=slot.key,
            code=action.refusal.value,
            meaning=slot_gone_meaning(action.refusal),
            detail=action.detail.message,
        )
        return "slot_gone"

    def _end_manual(self, state: DaemonState, action: EndManual, now: datetime) -> TickResult:
        record = RunRecord(
            at=now,
            trigger="manual",
            slot_key=None,
            run_id=action.run_id,
            status=action.detail.code,
            error=action.detail.message,
        )
        self._keeper.save(state.with_manual_handled(action.run_id).with_run(record))
        self._log.emit(
            "manual.refused",
            level="warning",
            run_id=action.run_id,
            code=action.detail.code,
            detail=action.detail.message,
        )
        return "manual_refused"

    def _start_update(
        self,
        state: DaemonState,
        action: StartUpdate,
        now: datetime,
        config: AgentConfig | None,
    ) -> TickResult:
        request, grant = action.request, action.grant
        release = grant.release
        window_closes_at = None
        if isinstance(request, ClaimSlot):
            catch_up = config.catch_up_minutes if config is not None else DEFAULT_CATCH_UP_MINUTES
            window_closes_at = request.slot.window_closes(timedelta(minutes=catch_up))
        claim = ClaimInProgress(
            run_id=str(grant.run_id),
            trigger="schedule" if isinstance(request, ClaimSlot) else "manual",
            slot_key=request.slot.key if isinstance(request, ClaimSlot) else None,
            release_version=release.version,
            manifest_b64=release.manifest_b64,
            signature_b64=release.signature_b64,
            artifact_url=self._control.absolute_url(release.artifact_url),
            claimed_at=now,
            window_closes_at=window_closes_at,
            token_expires_at=grant.token.expires_at,
        )
        if isinstance(request, ClaimSlot):
            state = state.consume(_consumed(request.slot))
            event = "claim.granted"
        else:
            state = state.with_manual_handled(request.run_id)
            event = "manual.granted"
        # The grant is the claim: it is on disk, with the consumed slot, before anything else.
        state = state.model_copy(update={"claim": claim})
        self._keeper.save(state)
        self._log.emit(
            event,
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            version=release.version,
            window_closes_at=format_instant(claim_deadline(claim)),
        )
        if self._stop_requested():
            self._log.emit("daemon.parked", slot_key=claim.slot_key, run_id=claim.run_id)
            return "parked"
        return self._dispatcher.dispatch(state, claim, now)


# The contract version from which a control plane reads the updater's fields.
UPDATER_CONTRACT = 3


def _consumed(slot: Slot) -> ConsumedSlot:
    return ConsumedSlot(key=slot.key, at=slot.at)
