"""The updater of the managed agent: one update on a customer host, from a claimed release to the
agent running the new build — or the old one again.

    apply(request)
      verify ─► accepted ─► download ─► downloaded ─► install + self-test ─► installed
        ─► switching (previous := old current, current := new) ─► switched
        ─► restart + health check ─► commit (floor, build facts)          → succeeded
                                   └► rolling_back ─► links back, restart,
                                      old version's health, mark bad      → rolled_back

Each arrow is a state-file write (`updater_state`) made before the next step starts, so a
process killed anywhere is finished by `resume()` from the last recorded step; every step is safe to
run twice. Until `switched` the old version never stopped running; a refusal or failure there is an
outcome with status `failed`. Only this module reads files, downloads and runs commands; the
verifying core (`agent_daemon.updater.verify`) is pure.

What ends each failure of an accepted update (docs/agent_updater.md "The state machine"):

* an `UpdateError` or `OSError` before the switch → `failed`, the running version untouched;
* after the switch (restart, health) → rolled back → `rolled_back` (`failed` on a first install);
* any other exception — a defect, or an input nobody imagined — is ended the same way at once by
  `_end_unexpected`: it never leaves `in_progress` behind to block the next release;
* an interruption (the process killed, the state directory not writable, a link not replaceable)
  keeps the recorded step for `resume()`, but each carry-on counts an attempt: past
  `MAX_RUN_ATTEMPTS` the update is given up — links restored, outcome recorded — instead of tried
  forever.

Revocation is honoured up to the swap (`swap_gate`): with the request comes a `ConfirmSwap`, asked
right before `switching` is recorded. Refused → `failed` (the staged build removed); unanswered →
`failed` with `retry`, the step stays `installed` (not counted as an attempt) and the same run,
applied again, asks again. `settle(reason)` ends an update whose window has closed without a new
switch: before the swap it ends as `failed` with that reason; after it (health check, roll back)
it is finished as `resume()` would — that switch happened inside the window.

Every outcome names its `reason` (`ground.contract.OutcomeReason`) when it is not a plain success,
and `retry` when the failure may pass (the platform unavailable, a cut download, a full disk):
nothing switched, and the daemon applies the same run again while its window is open.
"""

from __future__ import annotations

import base64
import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from agent_daemon.errors import (
    DaemonStateError,
    DownloadFailed,
    DownloadRefused,
    DownloadTooLong,
    DownloadUnavailable,
    HealthCheckFailed,
    InstallFailed,
    NotEnoughDisk,
    ReleaseRefused,
    SelfTestFailed,
    UntrustedArtifactSource,
    UpdateError,
    UpdateInProgress,
    VersionMarkedBad,
)
from agent_daemon.pid_lock import LockHeld, PidLock
from agent_daemon.updater.artifact_source import (
    ArtifactSource,
    control_origin,
    parse_origin,
    resolve_source,
)
from agent_daemon.updater.download import (
    ArtifactSpec,
    DownloadLimits,
    clean_staging,
    download_artifact,
    final_path,
)
from agent_daemon.updater.install import install_build, self_test
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.managed_service import AgentService
from agent_daemon.updater.swap_gate import (
    ConfirmSwap,
    SwapAllowed,
    SwapRefused,
    SwapUnanswered,
)
from agent_daemon.updater.update_records import Status, UpdateOutcome, UpdateRequest
from agent_daemon.updater.updater_settings import UpdaterSettings
from agent_daemon.updater.updater_state import (
    Build,
    InProgress,
    RecordedOutcome,
    Step,
    UpdaterState,
    UpdaterStateStore,
)
from agent_daemon.updater.verify import VerifiedRelease, verify_release
from ground.clock import Clock
from ground.contract import AnswerCode, OutcomeReason
from signed_release import Manifest, parse_manifest

__all__ = [
    "MAX_RUN_ATTEMPTS",
    "UPDATER_UMASK",
    "UPDATE_LOCK_NAME",
    "UpdateOutcome",
    "UpdateRequest",
    "Updater",
    "failure_reason",
    "update_lock",
]

UPDATE_LOCK_NAME = "update.lock"
# How often one accepted update is carried on (its apply, then each resume) before it is given up:
# an update interrupted again and again (a crash loop, a state directory that stays read-only)
# must end as an outcome, not block every later release.
MAX_RUN_ATTEMPTS = 3
# Folders and files the updater creates are readable by the managed agent's user and writable only
# by the updater, whatever umask the caller (a shell, systemd's UMask=) happened to have.
UPDATER_UMASK = 0o022
# An outcome's error travels in a report whose field holds at most 2,000 characters
# (ground.contract.MAX_MESSAGE_LENGTH); messages quoting hostile input are cut well before.
MAX_ERROR_CHARACTERS = 1000


@contextmanager
def update_lock(state_dir: Path) -> Iterator[None]:
    """One update at a time (`UpdateInProgress` otherwise), across processes and threads."""
    lock = PidLock(state_dir / UPDATE_LOCK_NAME)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise UpdateInProgress(
            f"another update is in progress (lock {exc.path} held by pid {exc.pid or 'unknown'});"
            " one update at a time"
        ) from exc
    try:
        yield
    finally:
        lock.release()


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


class _RollBack(Exception):
    """The switched-to build failed after the switch: go back."""


class Updater:
    """Applies one update at a time. `on_step` (optional) is called with the name of each step
    boundary right after it is recorded — the crash tests kill the process there."""

    def __init__(
        self,
        *,
        settings: UpdaterSettings,
        client: httpx.Client,
        clock: Clock,
        on_step: Callable[[str], None] | None = None,
        on_progress: Callable[[str, float, float], None] | None = None,
    ) -> None:
        self._settings = settings
        # (step, done, total) during long steps: "download" in bytes, "health" in seconds.
        self._on_progress = on_progress
        self._client = client
        self._clock = clock
        self._on_step = on_step or (lambda _step: None)
        self._layout = InstallLayout(settings.install_root)
        self._store = UpdaterStateStore(settings.state_dir)
        self._staging = settings.state_dir / "staging"
        self._service = AgentService(
            restart_command=settings.restart_command,
            health_command=settings.health_command,
            deadline_seconds=settings.health_deadline_seconds,
            poll_seconds=settings.health_poll_seconds,
            clock=clock,
            agent_user=settings.agent_user,
            on_progress=on_progress,
        )
        # The control plane's origin is the client's base URL (the daemon's client has one).
        self._control_origin = control_origin(client)
        self._artifact_origins = tuple(parse_origin(o) for o in settings.artifact_origins)

    # -- the interface ------------------------------------------------------------------------

    @property
    def settings(self) -> UpdaterSettings:
        return self._settings

    def installed_version(self) -> str | None:
        """The version `current` names (a complete one), or None before the first install."""
        return self._layout.link_target("current")

    def apply(self, request: UpdateRequest) -> UpdateOutcome:
        """Verify, install, switch, restart, health-check, and commit or roll back. Refusals and
        failures are outcomes; the old version keeps running in every refusal."""
        with _umask(UPDATER_UMASK):
            try:
                with update_lock(self._settings.state_dir):
                    return self._apply_guarded(request)
            except UpdateInProgress as exc:
                return self._outcome(
                    request.run_id,
                    "failed",
                    error=str(exc),
                    reason=OutcomeReason.INTERRUPTED,
                    retry=True,
                )
            except DaemonStateError as exc:
                return self._outcome(request.run_id, "failed", error=str(exc))
            except OSError as exc:
                # E.g. the state directory is full or read-only: whatever step was recorded last
                # is carried on by the same run applied again (at most MAX_RUN_ATTEMPTS).
                reason, retry = failure_reason(exc)
                return self._outcome(
                    request.run_id,
                    "failed",
                    error=f"update interrupted: {_describe(exc)}",
                    reason=reason,
                    retry=retry,
                )

    def resume(self) -> UpdateOutcome | None:
        """After a crash: finish (or undo) what the state file says was in progress; None when
        nothing was. Each call counts an attempt; past MAX_RUN_ATTEMPTS the update is given up
        (links restored, outcome recorded). Raises UpdateInProgress while another process
        updates, DaemonStateError for an unreadable or newer state file, OSError when the state
        cannot be written."""
        with _umask(UPDATER_UMASK), update_lock(self._settings.state_dir):
            state = self._store.load()
            if state.in_progress is None:
                return None
            return self._run(state, confirm=None)

    def settle(self, reason: OutcomeReason) -> UpdateOutcome | None:
        """End the update in progress without a new switch (its window closed, or no claim is
        behind it any more); None when nothing was in progress.

        Before the swap it ends `failed` with `reason` — nothing switched, the staged build
        removed, so the next slot starts fresh. After it (the switch was allowed inside the
        window; the health check or a roll back was pending) it is finished as `resume()` does,
        which is not a new switch. Raises as `resume()` does."""
        with _umask(UPDATER_UMASK), update_lock(self._settings.state_dir):
            state = self._store.load()
            progress = state.in_progress
            if progress is None:
                return None
            if progress.step in _BEFORE_THE_SWAP:
                error = (
                    f"update to {progress.version} ended at step {progress.step!r} without "
                    f"switching ({reason.value})"
                )
                return self._finish_failed(state, error, bad=False, reason=reason, keep=False)
            return self._run(state, confirm=None)

    # -- steps --------------------------------------------------------------------------------

    def _apply_guarded(self, request: UpdateRequest) -> UpdateOutcome:
        try:
            return self._apply_locked(request)
        except (OSError, UpdateInProgress, DaemonStateError):
            raise
        except Exception as exc:
            # Only a defect gets here (`_run` ends every failure of the steps itself). It costs
            # this run, never the host: an update it left recorded is ended too.
            in_progress = self._store.load().in_progress
            if in_progress is not None and in_progress.run_id == request.run_id:
                return self._end_unexpected(_describe(exc))
            return self._outcome(request.run_id, "failed", error=f"update failed: {_describe(exc)}")

    def _apply_locked(self, request: UpdateRequest) -> UpdateOutcome:
        state = self._store.load()
        last = state.last_outcome
        if last is not None and last.run_id == request.run_id and last.status != "failed":
            # The same run again (the daemon died before reporting): the same answer, not a
            # second attempt. A failed run may be tried again.
            return UpdateOutcome(**last.model_dump())
        if state.in_progress is not None:
            if state.in_progress.run_id == request.run_id:
                return self._run(state, confirm=request.confirm_swap)
            return self._outcome(
                request.run_id,
                "failed",
                error=f"update {state.in_progress.run_id} is unfinished; resume() it first",
            )
        installed = self.installed_version()
        try:
            # Checked before anything is stored: the URL is the control plane's word, untrusted.
            self._source(request.artifact_url)
            verified = self._verify(request, state, installed)
        except UpdateError as exc:
            reason, retry = failure_reason(exc)
            return self._outcome(
                request.run_id, "failed", error=str(exc), reason=reason, retry=retry
            )
        if verified.version == installed:
            return self._commit_without_change(state, request.run_id, verified.manifest)
        state = state.model_copy(
            update={
                "in_progress": InProgress(
                    run_id=request.run_id,
                    step="accepted",
                    version=verified.version,
                    manifest_b64=base64.b64encode(request.manifest).decode(),
                    signature_b64=base64.b64encode(request.signature).decode(),
                    artifact_url=request.artifact_url,
                    from_version=installed,
                    previous_before=self._layout.link_target("previous"),
                )
            }
        )
        self._record(state, "accepted")
        return self._run(state, confirm=request.confirm_swap)

    def _verify(
        self, request: UpdateRequest, state: UpdaterState, installed: str | None
    ) -> VerifiedRelease:
        running = state.builds.get(installed) if installed else None
        verified = verify_release(
            request.manifest,
            request.signature,
            self._settings.trusted_keys,
            installed_version=installed,
            floor=state.floor,
            now=self._clock.now(),
            platform=self._settings.platform,
            channel=self._settings.channel,
            running_build_date=running.issued_at if running else None,
        )
        reason = state.bad_versions.get(verified.version)
        if reason is not None:
            raise VersionMarkedBad(
                f"release refused: version {verified.version} failed on this host before and is "
                f"not retried ({reason})"
            )
        return verified

    def _source(self, url: str) -> ArtifactSource:
        return resolve_source(url, control=self._control_origin, allowed=self._artifact_origins)

    def _run(self, state: UpdaterState, *, confirm: ConfirmSwap | None) -> UpdateOutcome:
        """Carry the update in progress on from its recorded step to an outcome — or, past
        MAX_RUN_ATTEMPTS, give it up. Nothing but an OSError (an interruption: the state stays for
        `resume()`) leaves here without an outcome."""
        progress = state.in_progress
        assert progress is not None
        if progress.attempts >= MAX_RUN_ATTEMPTS:
            return self._end_unexpected(
                f"given up after {progress.attempts} attempts (interrupted at step "
                f"{progress.step!r} each time)"
            )
        state = state.with_attempt()
        self._store.save(state)
        try:
            return self._steps(state, confirm)
        except OSError:
            raise
        except Exception as exc:
            return self._end_unexpected(_describe(exc))

    def _steps(self, state: UpdaterState, confirm: ConfirmSwap | None) -> UpdateOutcome:
        progress = state.in_progress
        assert progress is not None
        manifest = parse_manifest(progress.manifest_bytes)
        step: Step = progress.step
        try:
            if step == "accepted":
                self._download(progress, manifest)
                state = self._advance(state, "downloaded")
                step = "downloaded"
            if step == "downloaded":
                self._install(progress, manifest)
                state = self._advance(state, "installed")
                step = "installed"
        except SelfTestFailed as exc:
            self._layout.remove_version(progress.version)
            return self._finish_failed(
                state, str(exc), bad=True, reason=OutcomeReason.INSTALL_FAILED
            )
        except (UpdateError, OSError) as exc:
            reason, retry = failure_reason(exc)
            return self._finish_failed(
                state, _describe(exc), bad=False, reason=reason, retry=retry, keep=retry
            )
        if step == "installed":
            if self._layout.complete_sha256(progress.version) != manifest.sha256:
                # Only something outside the updater can do this (retention protects the
                # version): never point `current` at a folder that is not this whole build.
                return self._finish_failed(
                    state,
                    f"versions/{progress.version} vanished or changed after its install; "
                    "not switching to it",
                    bad=False,
                    reason=OutcomeReason.INSTALL_FAILED,
                )
            verdict = SwapAllowed(at=self._clock.now()) if confirm is None else confirm()
            if isinstance(verdict, SwapUnanswered):
                return self._defer(state, verdict)
            if isinstance(verdict, SwapRefused):
                # Revoked up to the swap: the build never runs here, and is not kept for later.
                self._layout.remove_version(progress.version)
                return self._finish_failed(
                    state, verdict.error, bad=False, reason=verdict.reason, keep=False
                )
            state = state.model_copy(
                update={"in_progress": progress.model_copy(update={"switched_at": verdict.at})}
            )
            state = self._advance(state, "switching")
            step = "switching"
        if step == "switching":
            self._switch(previous=progress.from_version, current=progress.version)
            state = self._advance(state, "switched")
            step = "switched"
        if step == "switched":
            try:
                self._restart_and_check(progress.version)
            except (_RollBack, UpdateError) as failure:
                if progress.from_version is None:
                    return self._finish_failed(
                        state,
                        f"{failure}; there is no earlier version to roll back to",
                        bad=True,
                        reason=OutcomeReason.HEALTH_CHECK_FAILED,
                    )
                state = self._advance(state, "rolling_back", failure=str(failure))
                step = "rolling_back"
            else:
                return self._commit(state, manifest)
        return self._roll_back(state, manifest)

    def _download(self, progress: InProgress, manifest: Manifest) -> None:
        clock = self._clock
        source = self._source(progress.artifact_url)
        download_artifact(
            self._client,
            ArtifactSpec(
                url=progress.artifact_url,
                sha256=manifest.sha256,
                length=manifest.length,
                unpacked_size=manifest.unpacked_size,
            ),
            staging=self._staging,
            install_root=self._settings.install_root,
            limits=DownloadLimits(
                read_timeout=clock.real_seconds(self._settings.download_read_timeout_seconds),
                deadline=clock.real_seconds(self._settings.download_deadline_seconds),
                disk_reserve_bytes=self._settings.disk_reserve_bytes,
            ),
            send_credential=source.send_credential,
            on_progress=self._on_progress,
        )

    def _install(self, progress: InProgress, manifest: Manifest) -> None:
        build = install_build(
            self._layout,
            final_path(self._staging, manifest.sha256),
            version=progress.version,
            sha256=manifest.sha256,
            unpacked_size=manifest.unpacked_size,
        )
        self_test(build, progress.version, user=self._settings.agent_user)

    def _switch(self, *, previous: str | None, current: str | None) -> None:
        # `previous` first: between the two replacements `current` still names a whole version.
        self._layout.point("previous", previous)
        self._on_step("between_links")
        self._layout.point("current", current)

    def _restart_and_check(self, version: str) -> None:
        problem = self._service.restart()
        if problem is not None:
            raise _RollBack(problem)
        problem = self._service.wait_healthy(version)
        if problem is not None:
            raise _RollBack(problem)

    def _roll_back(self, state: UpdaterState, manifest: Manifest) -> UpdateOutcome:
        progress = state.in_progress
        assert progress is not None and progress.from_version is not None
        failure = progress.failure or "the new version failed"
        self._switch(previous=progress.previous_before, current=progress.from_version)
        self._on_step("links_restored")
        error = f"{progress.version}: {failure}; rolled back to {progress.from_version}"
        old_problem = self._service.restart() or self._service.wait_healthy(progress.from_version)
        if old_problem is not None:
            error += f"; {progress.from_version} is not healthy either: {old_problem}"
        return self._finish(
            state,
            manifest,
            status="rolled_back",
            error=error,
            bad_reason=failure,
            reason=OutcomeReason.HEALTH_CHECK_FAILED,
        )

    def _end_unexpected(self, error: str) -> UpdateOutcome:
        """End the update in progress now, from whatever step was recorded last: before the switch
        it failed and the old version runs on; after it, the links go back to the old version."""
        state = self._store.load()
        progress = state.in_progress
        if progress is None:
            # It ended after all (the failure came after the commit).
            last = state.last_outcome
            assert last is not None
            return UpdateOutcome(**last.model_dump())
        error = _clip(error)
        if progress.step in _BEFORE_THE_SWAP:
            return self._finish_failed(state, error, bad=False, reason=OutcomeReason.INTERRUPTED)
        if progress.step in ("switching", "switched") and progress.from_version is not None:
            state = self._advance(state, "rolling_back", failure=error)
            try:
                return self._roll_back(state, parse_manifest(progress.manifest_bytes))
            except Exception as exc:
                error = f"{error}; the rollback failed too: {_describe(exc)}"
        return self._abandon(state, error)

    def _abandon(self, state: UpdaterState, error: str) -> UpdateOutcome:
        """Last resort after the switch: put the links back as well as possible, record the end,
        mark the version bad. The next release finds nothing in progress."""
        progress = state.in_progress
        assert progress is not None
        if progress.from_version is not None:
            try:
                self._switch(previous=progress.previous_before, current=progress.from_version)
            except OSError as exc:
                error += f"; the links could not be restored: {_describe(exc)}"
        back = progress.from_version is not None and self.installed_version() == (
            progress.from_version
        )
        return self._finish(
            state,
            parse_manifest(progress.manifest_bytes),
            status="rolled_back" if back else "failed",
            error=_clip(f"{progress.version}: {error}"),
            bad_reason=_clip(error),
            reason=OutcomeReason.INTERRUPTED,
        )

    # -- recording -----------------------------------------------------------------------------

    def _record(self, state: UpdaterState, step_name: str) -> None:
        self._store.save(state)
        self._on_step(step_name)

    def _advance(self, state: UpdaterState, step: Step, failure: str | None = None) -> UpdaterState:
        state = state.with_step(step, failure=failure)
        self._record(state, step)
        return state

    def _commit(self, state: UpdaterState, manifest: Manifest) -> UpdateOutcome:
        return self._finish(
            state, manifest, status="succeeded", error=None, bad_reason=None, reason=None
        )

    def _defer(self, state: UpdaterState, verdict: SwapUnanswered) -> UpdateOutcome:
        """The swap was not confirmed (no answer): stay at `installed` — the staged build kept,
        this carry-on not counted as an attempt — so the same run asks again later."""
        progress = state.in_progress
        assert progress is not None
        kept = progress.model_copy(update={"attempts": max(0, progress.attempts - 1)})
        self._store.save(state.model_copy(update={"in_progress": kept}))
        self._on_step("swap_deferred")
        return self._outcome(
            progress.run_id,
            "failed",
            error=f"not switching to {progress.version} yet: {verdict.error}",
            reason=verdict.reason,
            retry=True,
        )

    def _commit_without_change(
        self, state: UpdaterState, run_id: str, manifest: Manifest
    ) -> UpdateOutcome:
        """The release names the version already running (e.g. re-signed with a later expiry)."""
        recorded = RecordedOutcome(
            run_id=run_id, status="succeeded", version=manifest.agent_version, error=None
        )
        state = state.finished(
            recorded,
            floor=manifest.manifest_version,
            build=(manifest.agent_version, _build_of(manifest)),
            at=self._clock.now(),
        )
        self._record(state, "committed")
        return UpdateOutcome(**recorded.model_dump())

    def _finish(
        self,
        state: UpdaterState,
        manifest: Manifest,
        *,
        status: Status,
        error: str | None,
        bad_reason: str | None,
        reason: OutcomeReason | None,
    ) -> UpdateOutcome:
        """The release was accepted: whatever became of its build, the floor moves past it — a
        release can be fixed only by a newer manifest, never by replaying an older one."""
        progress = state.in_progress
        assert progress is not None
        recorded = RecordedOutcome(
            run_id=progress.run_id,
            status=status,
            version=self.installed_version(),
            error=None if error is None else _clip(error),
            reason=reason,
            switched_at=progress.switched_at,
        )
        good = bad_reason is None
        state = state.finished(
            recorded,
            floor=manifest.manifest_version,
            build=(progress.version, _build_of(manifest)) if good else None,
            bad=None if bad_reason is None else (progress.version, bad_reason),
            at=self._clock.now(),
        )
        self._record(state, "committed")
        self._tidy(state, keep_part=None)
        return UpdateOutcome(**recorded.model_dump())

    def _finish_failed(
        self,
        state: UpdaterState,
        error: str,
        *,
        bad: bool,
        reason: OutcomeReason | None,
        retry: bool = False,
        keep: bool = True,
    ) -> UpdateOutcome:
        """Nothing switched (or nothing to switch back to): the running version stays. `keep`:
        the partial download stays to resume (a version marked bad never keeps one)."""
        progress = state.in_progress
        assert progress is not None
        error = _clip(error)
        recorded = RecordedOutcome(
            run_id=progress.run_id,
            status="failed",
            version=self.installed_version(),
            error=error,
            reason=reason,
            switched_at=progress.switched_at,
            retry=retry,
        )
        state = state.finished(
            recorded, bad=(progress.version, error) if bad else None, at=self._clock.now()
        )
        self._record(state, "failed")
        manifest = parse_manifest(progress.manifest_bytes)
        self._tidy(state, keep_part=manifest.sha256 if keep and not bad else None)
        return UpdateOutcome(**recorded.model_dump())

    def _tidy(self, state: UpdaterState, *, keep_part: str | None) -> None:
        """Retention and staging clean-up; a failure here never changes an outcome."""
        try:
            self._layout.clean_temporaries()
            self._layout.apply_retention(state.protected_versions(), state.bad_versions)
            clean_staging(self._staging, keep_part=keep_part)
        except Exception:  # noqa: S110  # tidying is best effort; the outcome is recorded
            pass

    def _outcome(
        self,
        run_id: str,
        status: Status,
        *,
        error: str | None,
        reason: OutcomeReason | None = None,
        retry: bool = False,
    ) -> UpdateOutcome:
        return UpdateOutcome(
            status=status,
            version=self.installed_version(),
            error=None if error is None else _clip(error),
            run_id=run_id,
            reason=reason,
            retry=retry,
        )


_BEFORE_THE_SWAP = ("accepted", "downloaded", "installed")
_TOKEN_REASONS = {
    AnswerCode.TOKEN_REVOKED.value: OutcomeReason.TOKEN_REVOKED,
    AnswerCode.TOKEN_EXPIRED.value: OutcomeReason.TOKEN_EXPIRED,
}
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def failure_reason(exc: BaseException) -> tuple[OutcomeReason | None, bool]:
    """Why an update failed (`OutcomeReason`), and whether it may pass within the window:
    the platform unavailable, a cut or stalled download, a full disk, an interruption."""
    if isinstance(exc, DownloadRefused):
        return _TOKEN_REASONS.get(exc.code or "", OutcomeReason.DOWNLOAD_FAILED), False
    if isinstance(exc, DownloadUnavailable):
        return OutcomeReason.PLATFORM_UNAVAILABLE, True
    if isinstance(exc, NotEnoughDisk):
        return OutcomeReason.DISK_FULL, True
    if isinstance(exc, DownloadTooLong):
        return OutcomeReason.DOWNLOAD_FAILED, False
    if isinstance(exc, DownloadFailed):
        return OutcomeReason.DOWNLOAD_FAILED, True
    if isinstance(exc, ReleaseRefused | UntrustedArtifactSource):
        return OutcomeReason.VERIFICATION_FAILED, False
    if isinstance(exc, InstallFailed):
        return OutcomeReason.INSTALL_FAILED, False
    if isinstance(exc, HealthCheckFailed):
        return OutcomeReason.HEALTH_CHECK_FAILED, False
    if isinstance(exc, UpdateInProgress):
        return OutcomeReason.INTERRUPTED, True
    if isinstance(exc, OSError):
        if exc.errno in _DISK_FULL_ERRNOS:
            return OutcomeReason.DISK_FULL, True
        return OutcomeReason.INTERRUPTED, True
    return None, False


def _build_of(manifest: Manifest) -> Build:
    return Build(
        manifest_version=manifest.manifest_version,
        issued_at=manifest.issued_at,
        sha256=manifest.sha256,
    )


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARACTERS else text[: MAX_ERROR_CHARACTERS - 1] + "…"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UpdateError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.filename or 'install'}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"
