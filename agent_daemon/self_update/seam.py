"""Nachtwacht's own agent (the updater) updated through the managed agent's path, up to the install.

A granted self-update is verified and downloaded by the very code that verifies and downloads a
managed agent's build: `verify.verify_release` — here with `product="updater"`, so a managed
agent's build offered as the updater is refused (`WrongProduct`), as the managed updater refuses
an updater build — and `download.fetch.download_artifact`, from the same artifact sources. What
follows, installing the verified bundle beside the running updater, switching to it and restoring
the old one when the new one does not check in, is the host's mechanism: this module ends at
`SelfInstall` (`self_update.host_install` on a host), handed the verified artifact.

    apply(request)
      verify (product updater, this host's platform and channel, expiry, no downgrade, the updater
            line's floor: `self_update.own_floor`)
        ─► download (the signed length and sha256, resumable)
        ─► install (beside the running build, not switched to)
        ─► confirm (the run's token still good, its window open: `swap_gate`)
        ─► switch   ─► SwitchUnderWay

`running_version` is None when no `SelfInstall` is given: the daemon then never plans a
self-update (`minute.decision`). A refusal or a failure before the switch is the run's outcome;
once `install` returned, the switch is under way and the outcome is not known yet: the daemon
records it, restarts the unit (`SelfInstall.restart`), and the run's outcome is reported by the
build that learns it — the new one once it checks in (`succeeded`), or the old one the guard
restored (`rolled_back`, with the guard's reason).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import httpx

from agent_daemon.errors import SelfUpdateError, UpdateError
from agent_daemon.self_update.own_floor import OwnFloorStore
from agent_daemon.self_update.pending_switch import SwitchRun
from agent_daemon.updater.download.artifact_source import (
    control_origin,
    parse_origin,
    resolve_source,
)
from agent_daemon.updater.download.fetch import ArtifactSpec, DownloadLimits, download_artifact
from agent_daemon.updater.failure_reasons import describe, failure_reason
from agent_daemon.updater.release_keys import trusted_release_keys
from agent_daemon.updater.swap_gate import SwapAllowed, SwapUnanswered
from agent_daemon.updater.update_records import SwitchUnderWay, UpdateOutcome, UpdateRequest
from agent_daemon.updater.updater_settings import UpdaterSettings
from agent_daemon.updater.verify import verify_release
from ground.clock import Clock
from ground.contract import OutcomeReason

__all__ = ["SelfInstall", "SelfUpdater"]


class SelfInstall(Protocol):
    """The host's mechanism (`self_update.host_install.HostSelfInstall`). Each step raises on
    failure, with nothing switched."""

    def install(self, bundle: Path, version: str, unpacked_size: int) -> None:
        """Install the verified bundle at `bundle` as this version of the updater, beside the
        running build (not switched to)."""

    def switch(self, version: str, run: SwitchRun) -> None:
        """Switch to the installed `version`, uncommitted, the run kept beside the switch."""

    def restart(self) -> None:
        """Restart the unit into the build switched to; after the switch was recorded."""


class SelfUpdater:
    def __init__(
        self,
        *,
        settings: UpdaterSettings,
        client: httpx.Client,
        clock: Clock,
        running: str | None,
        install: SelfInstall | None,
    ) -> None:
        self._settings = settings
        self._client = client
        self._clock = clock
        self._running = running
        self._install = install
        self._staging = settings.state_dir / "staging-updater"
        self._floors = OwnFloorStore(settings.state_dir)

    def running_version(self) -> str | None:
        """The version of the updater running here, when this host can update it; else None."""
        return self._running if self._install is not None else None

    def apply(self, request: UpdateRequest) -> UpdateOutcome | SwitchUnderWay:
        """Verify, download and hand the bundle to the host's mechanism. Refusals and failures
        are outcomes; the running updater is untouched in every one of them."""
        try:
            return self._apply(request)
        except (UpdateError, SelfUpdateError, OSError) as exc:
            reason, retry = failure_reason(exc)
            return UpdateOutcome(
                status="failed",
                version=self._running,
                error=describe(exc) if isinstance(exc, OSError) else str(exc),
                run_id=request.run_id,
                reason=reason,
                retry=retry,
            )

    def restart(self) -> None:
        if self._install is not None:
            self._install.restart()

    def _apply(self, request: UpdateRequest) -> UpdateOutcome | SwitchUnderWay:
        install = self._install
        if install is None:
            return UpdateOutcome(
                status="failed",
                version=self._running,
                error="this host has no way to update nachtwacht's own agent",
                run_id=request.run_id,
                reason=OutcomeReason.INSTALL_FAILED,
            )
        now = self._clock.now()
        trusted = trusted_release_keys(self._settings, now)
        source = resolve_source(
            request.artifact_url,
            control=control_origin(self._client),
            allowed=tuple(parse_origin(o) for o in self._settings.artifact_origins),
        )
        verified = verify_release(
            request.manifest,
            request.signature,
            trusted,
            installed_version=self._running,
            floor=self._floors.load().floor_for(trusted),
            now=now,
            platform=self._settings.platform,
            channel=self._settings.channel,
            product="updater",
        )
        manifest = verified.manifest
        path = download_artifact(
            self._client,
            ArtifactSpec(
                url=request.artifact_url,
                sha256=manifest.sha256,
                length=manifest.length,
                unpacked_size=manifest.unpacked_size,
                gzip=True,
            ),
            staging=self._staging,
            install_root=self._settings.install_root,
            limits=DownloadLimits(
                read_timeout=self._clock.real_seconds(self._settings.download_read_timeout_seconds),
                deadline=self._clock.real_seconds(self._settings.download_deadline_seconds),
                disk_reserve_bytes=self._settings.disk_reserve_bytes,
            ),
            send_credential=source.send_credential,
        )
        # Installed beside the running build before the question: the answer is asked as close
        # to the switch as it can be, and a build installed but never switched harms nothing.
        install.install(path, verified.version, manifest.unpacked_size)
        switched_at = None
        if request.confirm_swap is not None:
            # Revocation is honoured up to the switch, as for the managed agent.
            verdict = request.confirm_swap()
            if not isinstance(verdict, SwapAllowed):
                return UpdateOutcome(
                    status="failed",
                    version=self._running,
                    error=verdict.error,
                    run_id=request.run_id,
                    reason=verdict.reason,
                    retry=isinstance(verdict, SwapUnanswered),
                )
            switched_at = verdict.at
        install.switch(
            verified.version,
            SwitchRun(
                run_id=request.run_id,
                to_version=verified.version,
                switched_at=switched_at,
                manifest_version=manifest.manifest_version,
                signer=verified.key_id,
            ),
        )
        return SwitchUnderWay(
            run_id=request.run_id, version=verified.version, switched_at=switched_at
        )
