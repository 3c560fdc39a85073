"""A stand-in for the updater's own-build steps (install, switch, restart) in unit tests of the
code that decides them: it records each call in order and does nothing else."""

from __future__ import annotations

from pathlib import Path

from agent_daemon.self_update.pending_switch import SwitchRun

__all__ = ["Recorder"]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def install(self, bundle: Path, version: str, unpacked_size: int) -> None:
        self.calls.append(f"install {version}")

    def switch(self, version: str, run: SwitchRun) -> None:
        self.calls.append(f"switch {version}")

    def restart(self) -> None:
        self.calls.append("restart")
