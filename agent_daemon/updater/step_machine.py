"""The steps of an accepted update, carried on from the one recorded last to an outcome.

    accepted ─► download ─► downloaded ─► install + self-test ─► installed
      ─► confirm the swap ─► switching ─► switched ─► restart + health check ─► commit
                                                   └► rolling_back ─► roll back

`StepMachine.run` counts an attempt, then goes on from the recorded step; every step is safe to
run twice. A failure before the swap ends the update `failed` (a self-test failure marks the
version bad; one that may pass keeps the partial download); a failure after it rolls back. Only an
`OSError` while recording — an interruption — leaves here without an outcome, the state kept for
`resume()`; past `MAX_RUN_ATTEMPTS` carry-ons the update is given up instead.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Literal

import httpx

from agent_daemon.errors import SelfTestFailed, UpdateError
from agent_daemon.updater import delta
from agent_daemon.updater.delivery_record import DeliveryRecord, DeliveryStore
from agent_daemon.updater.download.artifact_source import (
    ArtifactSource,
    control_origin,
    parse_origin,
    resolve_source,
)
from agent_daemon.updater.download.fetch import ArtifactSpec, DownloadLimits, download_artifact
from agent_daemon.updater.download.staging import final_path
from agent_daemon.updater.failure_reasons import describe, failure_reason
from agent_daemon.updater.install import install_build, self_test
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.step_recorder import StepRecorder
from agent_daemon.updater.swap_gate import (
    ConfirmSwap,
    SwapAllowed,
    SwapRefused,
    SwapUnanswered,
)
from agent_daemon.updater.switching import RollBack, Switcher
from agent_daemon.updater.update_records import OnProgress, UpdateOutcome
from agent_daemon.updater.updater_settings import UpdaterSettings
from agent_daemon.updater.updater_state import InProgress, Step, UpdaterState, UpdaterStateStore
from ground.clock import Clock
from ground.contract import OutcomeReason, PatchFallbackReason
from signed_release.delta import PatchBeyondMemoryBound, apply_patch
from signed_release.errors import ReleaseError
from signed_release.manifest import Manifest, parse_manifest

__all__ = ["MAX_RUN_ATTEMPTS", "StepMachine"]

# How often one accepted update is carried on (its apply, then each resume) before it is given up:
# an update interrupted again and again (a crash loop, a state directory that stays read-only)
# must end as an outcome, not block every later release.
MAX_RUN_ATTEMPTS = 3

DeliveryKind = Literal["patch", "full"]
# How the build came (`patch` or `full`), and why a patch its release offered was not used.
Delivery = tuple[DeliveryKind, PatchFallbackReason | None]


class StepMachine:
    def __init__(
        self,
        *,
        settings: UpdaterSettings,
        client: httpx.Client,
        clock: Clock,
        layout: InstallLayout,
        store: UpdaterStateStore,
        staging: Path,
        recorder: StepRecorder,
        switcher: Switcher,
        on_progress: OnProgress | None,
    ) -> None:
        self._settings = settings
        self._client = client
        self._clock = clock
        self._layout = layout
        self._store = store
        self._staging = staging
        self._recorder = recorder
        self._switcher = switcher
        self._on_progress = on_progress
        # The control plane's origin is the client's base URL (the daemon's client has one).
        self._control_origin = control_origin(client)
        self._artifact_origins = tuple(parse_origin(o) for o in settings.artifact_origins)
        # Why this run took the full artifact although its release offered a patch from this
        # host's base (delta.py): the outcome carries them.
        self.fallbacks: list[str] = []
        self._deliveries = DeliveryStore(settings.state_dir)

    def source(self, url: str) -> ArtifactSource:
        """Where the artifact may come from (`UntrustedArtifactSource` otherwise)."""
        return resolve_source(url, control=self._control_origin, allowed=self._artifact_origins)

    def run(self, state: UpdaterState, *, confirm: ConfirmSwap | None) -> UpdateOutcome:
        """Carry the update in progress on from its recorded step to an outcome — or, past
        MAX_RUN_ATTEMPTS, give it up. Nothing but an OSError (an interruption: the state stays for
        `resume()`) leaves here without an outcome."""
        progress = state.in_progress
        assert progress is not None
        if progress.attempts >= MAX_RUN_ATTEMPTS:
            return self._switcher.end_unexpected(
                f"given up after {progress.attempts} attempts (interrupted at step "
                f"{progress.step!r} each time)"
            )
        state = state.with_attempt()
        self._store.save(state)
        self.fallbacks = []
        try:
            outcome = self._steps(state, confirm)
        except OSError:
            raise
        except Exception as exc:
            outcome = self._switcher.end_unexpected(describe(exc))
        return replace(outcome, notes=tuple(self.fallbacks)) if self.fallbacks else outcome

    def _steps(self, state: UpdaterState, confirm: ConfirmSwap | None) -> UpdateOutcome:
        progress = state.in_progress
        assert progress is not None
        manifest = parse_manifest(progress.manifest_bytes)
        step: Step = progress.step
        try:
            if step == "accepted":
                self._record_delivery(progress, *self._download(progress, manifest))
                state = self._recorder.advance(state, "downloaded")
                step = "downloaded"
            if step == "downloaded":
                if self._patched_build_changed(progress, manifest):
                    self._record_delivery(
                        progress, "full", PatchFallbackReason.PATCHED_BUILD_CHANGED
                    )
                self._install(progress, manifest)
                state = self._recorder.advance(state, "installed")
                step = "installed"
        except SelfTestFailed as exc:
            self._layout.remove_version(progress.version)
            return self._recorder.finish_failed(
                state, str(exc), bad=True, reason=OutcomeReason.INSTALL_FAILED
            )
        except (UpdateError, OSError) as exc:
            reason, retry = failure_reason(exc)
            return self._recorder.finish_failed(
                state, describe(exc), bad=False, reason=reason, retry=retry, keep=retry
            )
        if step == "installed":
            if self._layout.complete_sha256(progress.version) != manifest.sha256:
                # Only something outside the updater can do this (retention protects the
                # version): never point `current` at a folder that is not this whole build.
                return self._recorder.finish_failed(
                    state,
                    f"versions/{progress.version} vanished or changed after its install; "
                    "not switching to it",
                    bad=False,
                    reason=OutcomeReason.INSTALL_FAILED,
                )
            verdict = SwapAllowed(at=self._clock.now()) if confirm is None else confirm()
            if isinstance(verdict, SwapUnanswered):
                return self._recorder.defer(state, verdict)
            if isinstance(verdict, SwapRefused):
                # Revoked up to the swap: the build never runs here, and is not kept for later.
                self._layout.remove_version(progress.version)
                return self._recorder.finish_failed(
                    state, verdict.error, bad=False, reason=verdict.reason, keep=False
                )
            state = state.model_copy(
                update={"in_progress": progress.model_copy(update={"switched_at": verdict.at})}
            )
            state = self._recorder.advance(state, "switching")
            step = "switching"
        if step == "switching":
            self._switcher.switch(previous=progress.from_version, current=progress.version)
            state = self._recorder.advance(state, "switched")
            step = "switched"
        if step == "switched":
            try:
                self._switcher.restart_and_check(progress.version)
            except (RollBack, UpdateError) as failure:
                if progress.from_version is None:
                    return self._recorder.finish_failed(
                        state,
                        f"{failure}; there is no earlier version to roll back to",
                        bad=True,
                        reason=OutcomeReason.HEALTH_CHECK_FAILED,
                    )
                state = self._recorder.advance(state, "rolling_back", failure=str(failure))
                step = "rolling_back"
            else:
                return self._recorder.commit(state, manifest)
        return self._switcher.roll_back(state, manifest)

    def _download(self, progress: InProgress, manifest: Manifest) -> Delivery:
        """Download the build: the patch from this host's base when one fits, else the full
        artifact. Returns how it came, and why an offered patch was not used."""
        fallback = self._download_patch(progress, manifest)
        if fallback == "patch":
            return ("patch", None)
        self._fetch(
            ArtifactSpec(
                url=progress.artifact_url,
                sha256=manifest.sha256,
                length=manifest.length,
                unpacked_size=manifest.unpacked_size,
                gzip=True,
            )
        )
        return ("full", fallback)

    def _download_patch(
        self, progress: InProgress, manifest: Manifest
    ) -> Literal["patch"] | PatchFallbackReason | None:
        """Download and apply the patch from this host's base, if the release offers one:
        "patch" when it made the signed build; else why not (the full artifact follows; the
        reason in words kept in `fallbacks`), or None when no patch was offered to this host."""
        install_root = self._settings.install_root
        if not manifest.patches or progress.from_version is None:
            return None
        offer = delta.offer_for(install_root, progress.from_version, manifest)
        if offer is None:
            self.fallbacks.append(
                f"no patch offered fits this host's base of {progress.from_version} "
                "(missing, or not the build it was)"
            )
            if not any(o.base_version == progress.from_version for o in manifest.patches):
                # No patch from the version this host runs: a full build is no fallback.
                return None
            if delta.base_path(install_root, progress.from_version).is_file():
                return PatchFallbackReason.BASE_ALTERED
            return PatchFallbackReason.BASE_MISSING
        url = delta.patch_url(progress.artifact_url, offer)
        if url is None:
            return PatchFallbackReason.MIRROR
        assert manifest.tar_length is not None and manifest.tar_sha256 is not None
        patch = final_path(self._staging, offer.sha256)
        try:
            try:
                self._fetch(
                    ArtifactSpec(
                        url=url, sha256=offer.sha256, length=offer.length,
                        unpacked_size=manifest.tar_length,
                    )
                )  # fmt: skip
            except (UpdateError, OSError, ReleaseError) as exc:
                self.fallbacks.append(f"patch from {offer.base_version} not used: {describe(exc)}")
                return PatchFallbackReason.PATCH_DOWNLOAD_FAILED
            try:
                apply_patch(
                    delta.base_path(install_root, progress.from_version),
                    patch,
                    delta.patched_tar_path(self._staging, manifest),
                    target_length=manifest.tar_length,
                    target_sha256=manifest.tar_sha256,
                )
            except (OSError, ReleaseError) as exc:
                self.fallbacks.append(f"patch from {offer.base_version} not used: {describe(exc)}")
                if isinstance(exc, PatchBeyondMemoryBound):
                    return PatchFallbackReason.MEMORY_BOUND
                return PatchFallbackReason.PATCH_REFUSED
        finally:
            patch.unlink(missing_ok=True)
        return "patch"

    def _fetch(self, spec: ArtifactSpec) -> None:
        clock = self._clock
        source = self.source(spec.url)
        download_artifact(
            self._client,
            spec,
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

    def _record_delivery(
        self, progress: InProgress, kind: DeliveryKind, reason: PatchFallbackReason | None
    ) -> None:
        # What it reports, never whether the update goes on: unwritten, the outcome says nothing.
        with contextlib.suppress(OSError):
            self._deliveries.save(
                DeliveryRecord(run_id=progress.run_id, kind=kind, fallback_reason=reason)
            )

    def _patched_build_changed(self, progress: InProgress, manifest: Manifest) -> bool:
        """When the patched tar is gone or altered since it was verified, fetch the full
        artifact instead; True when it did."""
        recorded = self._deliveries.of(progress.run_id)
        if recorded is not None and recorded.kind == "full":
            return False
        patched = delta.verified_patched_tar(self._staging, manifest)
        artifact = final_path(self._staging, manifest.sha256)
        if patched is not None or artifact.is_file() or not manifest.patches:
            return False
        self.fallbacks.append("the patched build changed on disk before its install")
        self._download(progress.model_copy(update={"from_version": None}), manifest)
        return True

    def _install(self, progress: InProgress, manifest: Manifest) -> None:
        patched = delta.verified_patched_tar(self._staging, manifest)
        artifact = final_path(self._staging, manifest.sha256)
        build = install_build(
            self._layout,
            artifact if patched is None else patched,
            version=progress.version,
            sha256=manifest.sha256,
            unpacked_size=manifest.unpacked_size,
            compressed=patched is None,
        )
        self_test(build, progress.version, user=self._settings.agent_user)
        try:
            delta.keep_base(
                self._settings.install_root,
                manifest,
                artifact=artifact if artifact.is_file() else None,
                patched_tar=patched,
                keep={progress.from_version} if progress.from_version else set(),
            )
        except (OSError, ReleaseError) as exc:
            # Without a base the next release comes whole; this one is installed all the same.
            self.fallbacks.append(f"no base kept for the next patch: {exc}")
