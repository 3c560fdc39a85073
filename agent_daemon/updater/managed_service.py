"""The managed agent's service as the updater sees it: a restart command and a health command.

Both are plain argument lists from the settings (never a shell). Health is asked until it succeeds
and prints the expected version or the deadline passes; the deadline and the pause between probes
are product seconds, so they follow a fast fake clock like every other wait. The health command
is the managed agent's own code: it runs as the agent's user when one is configured, and its output
is bounded and decoded leniently (`build_command`) — whatever it prints is an answer, not a crash.
"""

from __future__ import annotations

from datetime import timedelta

from agent_daemon.updater.build_command import CommandFailed, run_bounded
from agent_daemon.updater.update_records import OnProgress
from ground.clock import Clock

__all__ = ["AgentService"]

_OUTPUT_LIMIT = 200


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _OUTPUT_LIMIT else "…" + text[-_OUTPUT_LIMIT:]


class AgentService:
    def __init__(
        self,
        *,
        restart_command: tuple[str, ...],
        health_command: tuple[str, ...],
        deadline_seconds: float,
        poll_seconds: float,
        clock: Clock,
        agent_user: str | None = None,
        on_progress: OnProgress | None = None,
    ) -> None:
        self._agent_user = agent_user
        # ("health", product seconds waited, deadline, the version checked): the daemon's
        # progress lines.
        self._on_progress = on_progress
        self._restart_command = restart_command
        self._health_command = health_command
        self._deadline_seconds = deadline_seconds
        self._poll_seconds = poll_seconds
        self._clock = clock

    def restart(self) -> str | None:
        """None when the restart command succeeded, else what went wrong."""
        command = self._restart_command
        try:
            # The service manager's command, not the build's: it runs as the updater's user.
            result = run_bounded(command, timeout=self._clock.real_seconds(self._deadline_seconds))
        except CommandFailed as exc:
            return f"restart command failed: {exc}"
        if result.returncode != 0:
            return (
                f"restart command {' '.join(command)!r} exited {result.returncode}: "
                f"{_tail(result.stderr or result.stdout)}"
            )
        return None

    def wait_healthy(self, version: str) -> str | None:
        """None once the health command exits 0 printing `version` (as a word of its output);
        else, at the deadline, why it never did."""
        deadline = self._clock.now() + timedelta(seconds=self._deadline_seconds)
        last = "the health command never ran"
        while True:
            remaining = (deadline - self._clock.now()).total_seconds()
            if remaining <= 0:
                return (
                    f"not healthy within {self._deadline_seconds:g} s "
                    f"(expected the health command to report {version}; last: {last})"
                )
            try:
                result = run_bounded(
                    self._health_command,
                    timeout=max(self._clock.real_seconds(remaining), 0.5),
                    user=self._agent_user,
                )
            except CommandFailed as exc:
                last = f"the health command failed: {exc}"
            else:
                if result.returncode == 0 and version in result.stdout.split():
                    return None
                last = f"exit {result.returncode}, printed {_tail(result.stdout)!r}" + (
                    f", stderr {_tail(result.stderr)!r}" if result.stderr.strip() else ""
                )
            if self._on_progress is not None:
                waited = self._deadline_seconds - remaining
                self._on_progress("health", waited, self._deadline_seconds, version=version)
            self._clock.sleep(min(self._poll_seconds, remaining))
