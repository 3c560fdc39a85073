"""bench/process_cpu.py counts a process tree's CPU — its descendants' too — and nothing else.

Real processes burning real CPU: a child that starts a grandchild (both busy), and a busy
process outside the tree that must not be counted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from bench.process_cpu import CpuSnapshot, CpuUse, snapshot, tree_cpu_seconds
from tests.worlds.waiting import wait_until

_BUSY = (
    "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"
)
# A parent that starts a busy child, is busy itself, then waits for the child (reaping it: its
# CPU moves into the parent's count of reaped children) and sleeps so that it can be read.
_PARENT = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
    + _BUSY
    + "child.wait()\nprint('reaped', flush=True)\ntime.sleep(30)\n"
)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        # Each in a session of its own: its children (a grandchild busy for 30 s) go with it.
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _start(processes: list[subprocess.Popen[str]], code: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    processes.append(process)
    return process


def test_a_tree_counts_its_reaped_children_and_not_a_process_outside_it(
    processes: list[subprocess.Popen[str]],
) -> None:
    outsider = _start(processes, _BUSY.format(seconds=5))
    parent = _start(processes, _PARENT.format(child=_BUSY.format(seconds=0.6), seconds=0.4))
    assert parent.stdout is not None
    assert parent.stdout.readline().strip() == "reaped"
    counted = tree_cpu_seconds(parent.pid)
    # 0.6 s of the child (reaped) and 0.4 s of the parent, with the interpreters' start-up.
    assert 0.9 <= counted < 3.0
    # While the outsider burns a tenth of a CPU second more, the finished tree does not grow.
    burnt = tree_cpu_seconds(outsider.pid)
    wait_until(lambda: tree_cpu_seconds(outsider.pid) >= burnt + 0.1, what="the outsider to burn")
    assert tree_cpu_seconds(parent.pid) - counted < 0.05
    assert outsider.poll() is None


def test_a_live_grandchild_is_counted_while_it_runs(
    processes: list[subprocess.Popen[str]],
) -> None:
    parent = _start(processes, _PARENT.format(child=_BUSY.format(seconds=30), seconds=0))
    # Once the grandchild runs, the parent only waits for it: what grows is the grandchild's.
    wait_until(lambda: psutil.Process(parent.pid).children(), what="the grandchild to start")
    first = tree_cpu_seconds(parent.pid)
    wait_until(
        lambda: tree_cpu_seconds(parent.pid) - first >= 0.05, what="the grandchild's CPU counted"
    )


def test_a_gone_process_has_no_cpu() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert tree_cpu_seconds(gone.pid) == 0.0


def test_cores_are_cpu_seconds_over_the_wall_time_between_two_snapshots() -> None:
    before = CpuSnapshot(at=10.0, trees={"server": 1.0, "db": 2.0}, busy_ticks=0, total_ticks=0)
    after = CpuSnapshot(at=10.5, trees={"server": 1.5, "db": 2.1}, busy_ticks=75, total_ticks=100)
    use = CpuUse.between(before, after)
    assert use.cores == pytest.approx({"server": 1.0, "db": 0.2})
    assert use.machine_busy == pytest.approx(0.75)
    assert use.describe() == "server 1.00 cores, db 0.20 cores; machine 75% busy"


def test_intervals_together_weigh_each_by_its_length() -> None:
    short = CpuUse(seconds=1.0, cores={"server": 2.0}, machine_busy=1.0)
    long = CpuUse(seconds=3.0, cores={"server": 0.0}, machine_busy=0.0)
    together = CpuUse.over([short, long])
    assert together.seconds == 4.0
    assert together.cores == pytest.approx({"server": 0.5})
    assert together.machine_busy == pytest.approx(0.25)
    assert CpuUse.over([]).cores == {}


def test_a_snapshot_names_each_tree(processes: list[subprocess.Popen[str]]) -> None:
    busy = _start(processes, _BUSY.format(seconds=30))
    before = snapshot({"busy": busy.pid})
    time.sleep(1.0)  # the interval the snapshots measure: a second of the busy process's life
    use = CpuUse.between(before, snapshot({"busy": busy.pid}))
    assert set(use.cores) == {"busy"}
    assert use.cores["busy"] >= 0.05
    assert 0.0 < use.machine_busy <= 1.0
