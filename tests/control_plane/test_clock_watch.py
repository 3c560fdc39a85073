"""A replica's clock against the database server's: read at every liveness mark, shown in
`/metrics` and said in the log when they disagree by more than a round trip explains. A real
PostgreSQL, clocks set off on purpose, and a real `serve` whose clock libfaketime moves."""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from control_plane.liveness.clock_watch import CLOCK_OFF_SECONDS, ClockReading, ClockWatch
from control_plane.metrics.exposition import render_metrics
from control_plane.reconcile.worker import ReconcileWorker
from control_plane.registry import build_services
from control_plane.types import Pool
from ground.clock import SystemClock
from nachtwacht.demo_world.children import SUBPROCESSES
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from tests.worlds.clocks import ManualClock
from tests.worlds.waiting import wait_until

LOGGER = "control_plane.liveness.clock_watch"
# Debian's faketime package puts it under the machine's multiarch folder.
LIBFAKETIMES = sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))


@dataclass(frozen=True)
class SkewedClock(SystemClock):
    """The host's clock, set `by` away from the truth: what a host whose time synchronisation
    stopped reads. Not a fake clock: the product takes it for the real one."""

    by: timedelta = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.by


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


def test_agreement_is_quiet_and_disagreement_is_said_once_then_its_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    watch = ClockWatch()
    watch.observe(ClockReading(offset=0.004, margin=0.001))
    watch.observe(ClockReading(offset=-1.9, margin=0.001))
    assert _lines(caplog) == []

    watch.observe(ClockReading(offset=37.25, margin=0.002))
    watch.observe(ClockReading(offset=37.3, margin=0.002))  # the next tick: not said again
    (said,) = _lines(caplog)
    assert "37.2 s ahead of the database server's" in said
    assert "time synchronisation" in said

    watch.observe(ClockReading(offset=0.01, margin=0.001))
    assert len(_lines(caplog)) == 2
    assert "agrees with the database server's again" in _lines(caplog)[-1]
    watch.observe(ClockReading(offset=-5.0, margin=0.001))
    assert "5.0 s behind the database server's" in _lines(caplog)[-1]
    assert watch.offset_seconds == -5.0


def test_a_slow_round_trip_is_not_taken_for_a_wrong_clock(caplog: pytest.LogCaptureFixture) -> None:
    """Half the round trip is what the reading cannot know: 2.5 s off, give or take 1 s, may be
    1.5 s — within the bound."""
    caplog.set_level(logging.WARNING, LOGGER)
    watch = ClockWatch()
    watch.observe(ClockReading(offset=CLOCK_OFF_SECONDS + 0.5, margin=1.0))
    assert _lines(caplog) == []
    watch.observe(ClockReading(offset=CLOCK_OFF_SECONDS + 0.5, margin=0.1))
    assert len(_lines(caplog)) == 1


def test_the_database_servers_clock_is_read_and_compared(pool: Pool) -> None:
    watch = ClockWatch()
    with pool.connection() as conn:
        right = watch.measure(conn, SystemClock())
        wrong = watch.measure(conn, SkewedClock(by=timedelta(seconds=-90)))
    assert right is not None and abs(right.offset) < 1.0 and not right.off
    assert wrong is not None and abs(wrong.offset + 90) < 1.0 and wrong.off
    assert watch.last == wrong


def test_a_fake_clock_is_never_compared(pool: Pool) -> None:
    watch = ClockWatch()
    with pool.connection() as conn:
        assert watch.measure(conn, ManualClock(datetime(2026, 11, 30, 2, 0, tzinfo=UTC))) is None
    assert watch.last is None
    assert math.isnan(watch.offset_seconds)


def test_each_liveness_mark_reads_the_clock_and_metrics_show_it(
    pool: Pool, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    services = build_services(pool)
    clock = SkewedClock(by=timedelta(minutes=3))
    worker = ReconcileWorker(
        pool, clock, database_url, identity=services.replica, clock_watch=services.clock_watch
    )
    before = render_metrics(services.metrics.snapshot(clock.now()))
    assert f'nachtwacht_clock_offset_seconds{{replica="{services.replica}"}} NaN' in before

    worker.mark_alive()

    shown = render_metrics(services.metrics.snapshot(clock.now()))
    match = re.search(
        rf'^nachtwacht_clock_offset_seconds\{{replica="{re.escape(services.replica)}"\}} (\S+)$',
        shown,
        re.MULTILINE,
    )
    assert match is not None
    assert abs(float(match.group(1)) - 180) < 1.0
    (said,) = _lines(caplog)
    assert "180.0 s ahead of" in said
    with pool.connection() as conn:
        marked = conn.execute(
            "SELECT count(*) AS n FROM platform_liveness WHERE replica = %s", [services.replica]
        ).fetchone()
    assert marked is not None and marked["n"] == 1  # the mark itself is written as before


def _faketime() -> Path:
    if not LIBFAKETIMES:
        if os.environ.get("CI"):
            pytest.fail("libfaketime is missing in CI: install Debian's `faketime` package")
        pytest.skip("needs libfaketime (Debian's `faketime`; bin/test installs it as root)")
    return LIBFAKETIMES[0]


@pytest.mark.slow
def test_a_replica_whose_clock_is_off_says_so_in_its_log_and_metrics(
    database_url: str, tmp_path: Path
) -> None:
    """`serve` on a host whose clock is 45 s fast (libfaketime moves every clock the process
    reads, the database server's untouched): /metrics shows the offset and the log says what to
    check. An interpreter of its own: the preloaded library takes effect only when one starts."""
    library = _faketime()
    server = start_control_plane(
        stderr_path=tmp_path / "serve.stderr",
        database_url=database_url,
        env={
            "LD_PRELOAD": str(library),
            "FAKETIME": "+45s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        },
        args=["--no-migrate"],
        launcher=SUBPROCESSES,
    )
    try:
        _offset_is_seen(server)
    finally:
        server.stop()


def _offset_is_seen(server: RunningControlPlane) -> None:
    key = server.create_operator_key()

    def offset() -> float | None:
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            text = client.get("/metrics", headers={"Authorization": f"Bearer {key}"}).text
        match = re.search(r"^nachtwacht_clock_offset_seconds\{[^}]*\} (\S+)$", text, re.M)
        return None if match is None or match.group(1) == "NaN" else float(match.group(1))

    seen = wait_until(offset, timeout=60, interval=0.5, what="a clock offset in /metrics")
    assert abs(seen - 45) < 2.0
    assert re.search(r"4[4-6]\.\d s ahead of the database server's", server.stderr())
