"""The daemon's updater, loaded when an update first needs it.

An idle daemon asks only which version is installed — a symlink read, answered here exactly as
`Updater.installed_version` answers it — and, at each start, to settle an update a crash left
behind: when the updater's state file records none, that answer is None without the updater.
Applying an update, or settling one that is recorded, builds the `Updater` (importing the
download, verification and install code, and `cryptography`) the first time, and keeps it for
every later update.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.release_keys import floor_now
from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from agent_daemon.updater.updater_settings import UpdaterSettings
from agent_daemon.updater.updater_state import UpdaterStateStore
from ground.contract import OutcomeReason

if TYPE_CHECKING:
    from agent_daemon.updater.updater import Updater

__all__ = ["UpdaterOnDemand"]


class UpdaterOnDemand:
    """What the daemon needs of an `Updater`; `build` makes the real one on first use."""

    def __init__(self, *, settings: UpdaterSettings, build: Callable[[], Updater]) -> None:
        self._settings = settings
        self._build = build
        self._layout = InstallLayout(settings.install_root)
        self._state = UpdaterStateStore(settings.state_dir)
        self._updater: Updater | None = None
        self._building = threading.Lock()

    @property
    def settings(self) -> UpdaterSettings:
        return self._settings

    @property
    def loaded(self) -> bool:
        """Whether the updater itself has been built (an update has run in this process)."""
        return self._updater is not None

    def installed_version(self) -> str | None:
        """The version `current` names (a complete one), or None before the first install."""
        return self._layout.link_target("current")

    def accepted_floor(self, now: datetime) -> int | None:
        """The rollback floor under the release keys trusted at `now`, or None."""
        return floor_now(self._state.load(), self._settings, now)

    def apply(self, request: UpdateRequest) -> UpdateOutcome:
        return self._loaded().apply(request)

    def settle(self, reason: OutcomeReason) -> UpdateOutcome | None:
        if self._updater is None and self._state.load().in_progress is None:
            # Nothing in progress: `Updater.settle` would answer None too. The file is replaced
            # atomically, so this read sees a whole state; one that records an update goes on
            # to the updater, which reads it again under the update lock.
            return None
        return self._loaded().settle(reason)

    def _loaded(self) -> Updater:
        with self._building:
            if self._updater is None:
                self._updater = self._build()
            return self._updater
