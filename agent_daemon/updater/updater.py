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
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import httpx

from agent_daemon.errors import (
    DaemonStateError,
    SelfTestFailed,
    UpdateError,
    UpdateInProgress,
    VersionMarkedBad,
)
from agent_daemon.pid_lock import LockHeld, PidLock
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
from signed_release import Manifest, parse_manifest

__all__ = [
    "UPDATE_LOCK_NAME",
    "UpdateOutcome",
    "UpdateRequest",
    "Updater",
    "update_lock",
]

UPDATE_LOCK_NAME = "update.lock"

Status = Literal["succeeded", "failed", "rolled_back"]


@dataclass(frozen=True, kw_only=True)
class UpdateRequest:
    run_id: str
    manifest: bytes
    signature: bytes
    artifact_url: str  # absolute URL


@dataclass(frozen=True, kw_only=True)
class UpdateOutcome:
    status: Status
    version: str | None  # the version running afterwards
    error: str | None
    run_id: str


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
    ) -> None:
        self._settings = settings
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
        )

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
        try:
            with update_lock(self._settings.state_dir):
                return self._apply_locked(request)
        except (UpdateInProgress, DaemonStateError) as exc:
            return self._outcome(request.run_id, "failed", error=str(exc))
        except OSError as exc:
            # E.g. the state directory is full or read-only: whatever step was recorded last is
            # finished by resume() once the cause is fixed.
            return self._outcome(
                request.run_id, "failed", error=f"update interrupted: {_describe(exc)}"
            )

    def resume(self) -> UpdateOutcome | None:
        """After a crash: finish (or undo) what the state file says was in progress; None when
        nothing was. Raises UpdateInProgress while another process updates, DaemonStateError for
        an unreadable or newer state file."""
        with update_lock(self._settings.state_dir):
            state = self._store.load()
            if state.in_progress is None:
                return None
            return self._run(state)

    # -- steps --------------------------------------------------------------------------------

    def _apply_locked(self, request: UpdateRequest) -> UpdateOutcome:
        state = self._store.load()
        last = state.last_outcome
        if last is not None and last.run_id == request.run_id and last.status != "failed":
            # The same run again (the daemon died before reporting): the same answer, not a
            # second attempt. A failed run may be tried again.
            return UpdateOutcome(**last.model_dump())
        if state.in_progress is not None:
            if state.in_progress.run_id == request.run_id:
                return self._run(state)
            return self._outcome(
                request.run_id,
                "failed",
                error=f"update {state.in_progress.run_id} is unfinished; resume() it first",
            )
        installed = self.installed_version()
        url = urlsplit(request.artifact_url)
        if url.scheme not in ("http", "https") or not url.netloc:
            return self._outcome(
                request.run_id,
                "failed",
                error=f"artifact_url: {request.artifact_url!r} is not an absolute http(s) URL",
            )
        try:
            verified = self._verify(request, state, installed)
        except UpdateError as exc:
            return self._outcome(request.run_id, "failed", error=str(exc))
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
        return self._run(state)

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

    def _run(self, state: UpdaterState) -> UpdateOutcome:
        """Carry the update in progress on from its recorded step to an outcome."""
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
            return self._finish_failed(state, str(exc), bad=True)
        except (UpdateError, OSError) as exc:
            return self._finish_failed(state, _describe(exc), bad=False)
        if step == "installed":
            if self._layout.complete_sha256(progress.version) != manifest.sha256:
                # Only something outside the updater can do this (retention protects the
                # version): never point `current` at a folder that is not this whole build.
                return self._finish_failed(
                    state,
                    f"versions/{progress.version} vanished or changed after its install; "
                    "not switching to it",
                    bad=False,
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
            except _RollBack as failure:
                if progress.from_version is None:
                    return self._finish_failed(
                        state,
                        f"{failure}; there is no earlier version to roll back to",
                        bad=True,
                    )
                state = self._advance(state, "rolling_back", failure=str(failure))
                step = "rolling_back"
            else:
                return self._commit(state, manifest)
        return self._roll_back(state, manifest)

    def _download(self, progress: InProgress, manifest: Manifest) -> None:
        clock = self._clock
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
        )

    def _install(self, progress: InProgress, manifest: Manifest) -> None:
        build = install_build(
            self._layout,
            final_path(self._staging, manifest.sha256),
            version=progress.version,
            sha256=manifest.sha256,
            unpacked_size=manifest.unpacked_size,
        )
        self_test(build, progress.version)

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
        return self._finish(state, manifest, status="rolled_back", error=error, bad_reason=failure)

    # -- recording -----------------------------------------------------------------------------

    def _record(self, state: UpdaterState, step_name: str) -> None:
        self._store.save(state)
        self._on_step(step_name)

    def _advance(self, state: UpdaterState, step: Step, failure: str | None = None) -> UpdaterState:
        state = state.with_step(step, failure=failure)
        self._record(state, step)
        return state

    def _commit(self, state: UpdaterState, manifest: Manifest) -> UpdateOutcome:
        return self._finish(state, manifest, status="succeeded", error=None, bad_reason=None)

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
    ) -> UpdateOutcome:
        """The release was accepted: whatever became of its build, the floor moves past it — a
        release can be fixed only by a newer manifest, never by replaying an older one."""
        progress = state.in_progress
        assert progress is not None
        recorded = RecordedOutcome(
            run_id=progress.run_id, status=status, version=self.installed_version(), error=error
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

    def _finish_failed(self, state: UpdaterState, error: str, *, bad: bool) -> UpdateOutcome:
        """Nothing switched (or nothing to switch back to): the running version stays."""
        progress = state.in_progress
        assert progress is not None
        recorded = RecordedOutcome(
            run_id=progress.run_id, status="failed", version=self.installed_version(), error=error
        )
        state = state.finished(
            recorded, bad=(progress.version, error) if bad else None, at=self._clock.now()
        )
        self._record(state, "failed")
        manifest = parse_manifest(progress.manifest_bytes)
        self._tidy(state, keep_part=None if bad else manifest.sha256)
        return UpdateOutcome(**recorded.model_dump())

    def _tidy(self, state: UpdaterState, *, keep_part: str | None) -> None:
        """Retention and staging clean-up; a failure here never changes an outcome."""
        try:
            self._layout.clean_temporaries()
            self._layout.apply_retention(state.protected_versions(), state.bad_versions)
            clean_staging(self._staging, keep_part=keep_part)
        except OSError:
            pass

    def _outcome(self, run_id: str, status: Status, *, error: str | None) -> UpdateOutcome:
        return UpdateOutcome(
            status=status, version=self.installed_version(), error=error, run_id=run_id
        )


def _build_of(manifest: Manifest) -> Build:
    return Build(
        manifest_version=manifest.manifest_version,
        issued_at=manifest.issued_at,
        sha256=manifest.sha256,
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UpdateError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.filename or 'install'}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"
