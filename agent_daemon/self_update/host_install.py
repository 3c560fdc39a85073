"""The host's way to take a verified build of the updater: the daemon's `SelfInstall`.

    install(bundle, version, unpacked_size)
      unpack the bundle (`signed_release.build_archive`, the managed agent's member rules)
        ─► `own_builds.install_build` from its wheels, beside the running build
    switch(version, run)
      `pending_switch.switch` (`pending`, then `current`), the run kept beside it
    restart()
      `systemctl restart --no-block nachtwacht-agent.service`

Everything before the switch leaves the running build as it was: a refusal or a failure raises
`SelfUpdateError` and nothing was switched. The restart is a step of its own because the daemon
records the switch (its state file, its log line) before it is stopped: the unit is restarted by
the process it runs, so `--no-block` — waiting would wait for its own end — and the service
manager stops this daemon and starts `current`, after the guard's `pre-start`.

The switch's deadline is on this host's clock, the one the guard reads (`date +%s`), never the
daemon's product clock.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agent_daemon.errors import SelfUpdateError
from agent_daemon.self_update.own_builds import install_build
from agent_daemon.self_update.pending_switch import (
    CHECK_IN_DEADLINE,
    RESTART_UNIT_COMMAND,
    SwitchRun,
    switch,
)
from agent_daemon.updater.build_command import CommandFailed, run_bounded
from signed_release.build_archive import BuildRefused, unpack_build
from signed_release.errors import ArtifactError

__all__ = ["RESTART_TIMEOUT_SECONDS", "HostSelfInstall"]

# `--no-block` returns once the job is queued.
RESTART_TIMEOUT_SECONDS = 60.0
_WHEELS = "wheels"


@dataclass(frozen=True, kw_only=True)
class HostSelfInstall:
    own_root: Path
    state_dir: Path
    restart_command: tuple[str, ...] = RESTART_UNIT_COMMAND
    # The interpreter the new build's venv is made from: the running build's.
    python: str = sys.executable

    def install(self, bundle: Path, version: str, unpacked_size: int) -> None:
        unpacked = bundle.parent / f".unpacked-{version}"
        shutil.rmtree(unpacked, ignore_errors=True)
        try:
            try:
                unpack_build(bundle, unpacked, unpacked_size=unpacked_size)
            except BuildRefused as exc:
                raise SelfUpdateError(f"archive refused for the updater {version}: {exc}") from exc
            except ArtifactError as exc:
                raise SelfUpdateError(
                    f"cannot unpack {bundle.name} for the updater {version}: {exc}"
                ) from exc
            install_build(
                own_root=self.own_root,
                wheels=_wheels_of(unpacked, version),
                version=version,
                python=self.python,
            )
        finally:
            shutil.rmtree(unpacked, ignore_errors=True)

    def switch(self, version: str, run: SwitchRun) -> None:
        switch(
            own_root=self.own_root,
            state_dir=self.state_dir,
            to_version=version,
            now=datetime.now(UTC),
            restart=lambda: None,
            deadline=CHECK_IN_DEADLINE,
            run=run,
        )

    def restart(self) -> None:
        command = self.restart_command
        try:
            result = run_bounded(command, timeout=RESTART_TIMEOUT_SECONDS)
        except CommandFailed as exc:
            raise SelfUpdateError(f"restart command failed: {exc}") from exc
        if result.returncode != 0:
            said = (result.stderr or result.stdout).strip()[-200:]
            raise SelfUpdateError(
                f"restart command {' '.join(command)!r} exited {result.returncode}: {said} "
                "(the switch stays pending; the guard takes it back at its deadline unless the "
                "unit restarts into the new build)"
            )


def _wheels_of(unpacked: Path, version: str) -> Path:
    """The bundle's `<one folder>/wheels`, as `bin/package` makes it."""
    found = [p / _WHEELS for p in sorted(unpacked.iterdir()) if (p / _WHEELS).is_dir()]
    if len(found) != 1:
        raise SelfUpdateError(
            f"bundle of the updater {version}: expected one folder holding {_WHEELS}/, "
            f"found {len(found)}"
        )
    return found[0]
