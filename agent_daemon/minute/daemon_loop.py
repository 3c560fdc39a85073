"""The daemon as a service: the one-minute job, signals, systemd notify, one daemon per state dir.

The tick is one APScheduler job (`max_instances=1`, `coalesce=True`): a minute that is still busy
(a download) is never run twice at once, and minutes missed meanwhile collapse into one run.
APScheduler waits in real time, but product time can run fast (`NACHTWACHT_FAKE_CLOCK`), so the
job's trigger is `ServerMinuteTrigger`: it asks the server clock for the next instant at the agent's
second inside a minute and converts the wait with `clock.real_seconds`. The minute, its offset and
every timeout therefore follow one clock, and a fleet spreads its requests over the minute.

The watchdog means the minutes complete, not merely that the main thread is alive: the main
thread pings `WATCHDOG=1` only while `Activity.alive()` — a minute stuck in its worker thread
without a sign of life (a log line, a progress callback) past `stuck_after`, or no minute starting
for `idle_after`, stops the pings and systemd restarts the daemon (`WatchdogSec=`). `STATUS=`
says what the daemon is doing, whenever that changes.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger

from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.pid_lock import LockHeld, PidLock, lock_holder
from agent_daemon.errors import DaemonAlreadyRunning
from agent_daemon.host.activity import Activity
from agent_daemon.host.event_log import EventLog
from agent_daemon.host.stop_signals import stop_on_signals
from agent_daemon.host.systemd_notify import Notifier
from agent_daemon.minute.daemon import Daemon
from ground.contract import AgentConfig

__all__ = [
    "IDLE_AFTER_SECONDS",
    "STUCK_AFTER_SECONDS",
    "DaemonLock",
    "ServerMinuteTrigger",
    "run_service",
    "second_in_minute",
]

LOCK_FILE_NAME = "daemon.lock"
TICK_JOB_ID = "agent-minute"
_IDLE_CHECK_SECONDS = 5.0
# The watchdog's bounds, in product seconds (the caller converts them with its clock). A running
# minute shows a sign of life at least every chunk of a download, every health poll and every
# request (each bounded by its own timeout); ten minutes of silence is a stuck minute. An idle
# daemon starts a minute every minute; three without one is a dead scheduler.
STUCK_AFTER_SECONDS = 600.0
IDLE_AFTER_SECONDS = 180.0


def second_in_minute(agent_id: str) -> int:
    """A stable second in 0..59 per agent, so a fleet does not hit the control plane at once."""
    digest = hashlib.sha256(agent_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % 60


class ServerMinuteTrigger(BaseTrigger):  # type: ignore[misc]  # apscheduler ships no types
    """Fires once per minute of `clock` at `second` past the minute, however fast the clock runs.

    A pure function of its arguments: APScheduler asks more than once for the same fire time.
    """

    def __init__(self, clock: ServerClock, second: int) -> None:
        self._clock = clock
        self._second = second

    def next_product_instant(
        self, product_now: datetime, *, previous: datetime | None = None
    ) -> datetime:
        """The next instant at `:second` after `product_now`, never in `previous`'s minute."""
        target = product_now.replace(second=self._second, microsecond=0)
        if target <= product_now:
            target += timedelta(minutes=1)
        if previous is not None and target <= previous + timedelta(seconds=30):
            # A run that started a hair early by the product clock must not run again at once.
            target += timedelta(minutes=1)
        return target

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        product_now = self._clock.now()
        previous = None
        if previous_fire_time is not None:
            real_since = (now - previous_fire_time).total_seconds()
            previous = product_now - timedelta(seconds=real_since * self._clock.speed)
        target = self.next_product_instant(product_now, previous=previous)
        wait = self._clock.real_seconds((target - product_now).total_seconds())
        return now + timedelta(seconds=wait)

    def __str__(self) -> str:
        return f"every minute at :{self._second:02d} on the server's clock"


class DaemonLock:
    """One daemon per state directory. `status` asks the same lock whether a daemon is running."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_FILE_NAME
        self._lock = PidLock(self.path)

    def acquire(self) -> None:
        try:
            self._lock.acquire()
        except LockHeld as exc:
            raise DaemonAlreadyRunning(
                f"{self.path}: another agent daemon (pid {exc.pid or 'unknown'}) already runs "
                "with this state directory"
            ) from exc

    def release(self) -> None:
        self._lock.release()


def daemon_running(state_dir: Path) -> int | None:
    """The pid of the daemon holding the state directory's lock, or None when none does."""
    return lock_holder(state_dir / LOCK_FILE_NAME)


def run_service(
    *,
    daemon: Daemon,
    clock: ServerClock,
    agent_id: str,
    log: EventLog,
    environ: Mapping[str, str],
    stop: threading.Event,
    activity: Activity,
    read_config: Callable[[], AgentConfig | None] = lambda: None,
) -> int:
    """Run until SIGTERM/SIGINT sets `stop` (which the daemon also watches to park at a step
    boundary); the current step finishes or parks, then the process exits 0. `read_config` is
    the config a minute planned with (the cache), for `STATUS=`'s "waiting for 03:00"."""
    # APScheduler's own warnings (e.g. a skipped overlapping run) would be unstructured lines.
    logging.getLogger("apscheduler").setLevel(logging.CRITICAL)

    with stop_on_signals(stop):
        second = second_in_minute(agent_id)
        notifier = Notifier(environ)
        daemon.start()
        scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
            # The trigger answers in instants: the scheduler's zone is UTC, never the host's.
            timezone=UTC,
        )

        def minute() -> None:
            activity.tick_started()
            result = "error"
            try:
                result = daemon.tick()
            finally:
                activity.tick_finished(result, read_config())

        scheduler.add_job(minute, ServerMinuteTrigger(clock, second), id=TICK_JOB_ID)
        scheduler.start()
        log.emit(
            "daemon.ready",
            second_in_minute=second,
            clock=clock.describe(),
            watchdog=notifier.watchdog_interval is not None,
        )
        activity.ready(f"waiting for the first minute (every minute at :{second:02d})")
        shown = activity.status_line()
        notifier.ready(shown)
        interval = notifier.watchdog_interval or _IDLE_CHECK_SECONDS
        while not stop.wait(min(interval, _IDLE_CHECK_SECONDS)):
            status = activity.status_line()
            if status != shown:
                # Before the watchdog verdict: a stuck daemon says so before the pings stop.
                notifier.status(status)
                if status.startswith("stuck") and not shown.startswith("stuck"):
                    log.emit("daemon.stuck", level="error", status=status)
                shown = status
            if scheduler.running and activity.alive():
                notifier.watchdog()
        notifier.stopping()
        log.emit("daemon.stopping")
        # Waits for a running minute; the daemon's stop check parks it at the next step boundary.
        scheduler.shutdown(wait=True)
        log.emit("daemon.stopped")
        return 0
