"""CPU time of process trees and of the whole machine, read from /proc (Linux), for the benches.

A bench that compares a server with a baseline must show when the machine, not the code, set the
pace: `snapshot` before and after a burst, `CpuUse.between` the two gives the cores each tree
used (the process, its live descendants, and the children they have already reaped) and how busy
the machine's cores were over the same wall time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuSnapshot", "CpuUse", "snapshot", "tree_cpu_seconds"]

_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
_PROC = Path("/proc")


def _stat_fields(pid: str) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces and parentheses);
    None for a process that is gone."""
    try:
        text = (_PROC / pid / "stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def _process_table() -> tuple[dict[int, int], dict[int, int]]:
    """Every live process's parent and its CPU ticks (its own, and what it has collected from its
    reaped children), read from /proc once."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields is None:
            continue
        # After the name: state, ppid, …; utime, stime, cutime, cstime are the 12th-15th.
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        ticks[pid] = sum(int(value) for value in fields[11:15])
    return parents, ticks


def _tree_seconds(root: int, parents: dict[int, int], ticks: dict[int, int]) -> float:
    tree = {root} if root in ticks else set()
    grew = True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= found
        grew = bool(found)
    return sum(ticks[pid] for pid in tree) / _TICKS_PER_SECOND


def tree_cpu_seconds(root: int) -> float:
    """User and system CPU seconds of `root` and every live descendant, with what each has
    collected from its reaped children (0.0 when `root` is gone)."""
    return _tree_seconds(root, *_process_table())


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot: idle and iowait are not busy."""
    first = (_PROC / "stat").read_text().splitlines()[0].split()[1:]
    values = [int(value) for value in first[:8]]
    idle = values[3] + values[4]
    total = sum(values)
    return total - idle, total


@dataclass(frozen=True, kw_only=True)
class CpuSnapshot:
    at: float  # time.monotonic()
    trees: Mapping[str, float]  # name -> CPU seconds so far
    busy_ticks: int
    total_ticks: int


def snapshot(roots: Mapping[str, int]) -> CpuSnapshot:
    """The CPU seconds of each named tree (name -> root pid) and the machine's, now."""
    busy, total = _machine_ticks()
    parents, ticks = _process_table()  # one walk of /proc for all the trees
    return CpuSnapshot(
        at=time.monotonic(),
        trees={name: _tree_seconds(pid, parents, ticks) for name, pid in roots.items()},
        busy_ticks=busy,
        total_ticks=total,
    )


@dataclass(frozen=True, kw_only=True)
class CpuUse:
    seconds: float  # the wall time between the two snapshots
    cores: Mapping[str, float]  # name -> cores used on average
    machine_busy: float  # 0..1, all cores

    @classmethod
    def between(cls, before: CpuSnapshot, after: CpuSnapshot) -> CpuUse:
        seconds = max(after.at - before.at, 1e-9)
        total = after.total_ticks - before.total_ticks
        return cls(
            seconds=seconds,
            cores={
                name: max(after.trees[name] - before.trees.get(name, 0.0), 0.0) / seconds
                for name in after.trees
            },
            machine_busy=(after.busy_ticks - before.busy_ticks) / total if total > 0 else 0.0,
        )

    @classmethod
    def over(cls, uses: list[CpuUse]) -> CpuUse:
        """Several intervals as one: each tree's cores weighted by the intervals' lengths."""
        seconds = sum(use.seconds for use in uses)
        if not uses or seconds <= 0:
            return cls(seconds=0.0, cores={}, machine_busy=0.0)
        names = dict.fromkeys(name for use in uses for name in use.cores)  # first seen first
        return cls(
            seconds=seconds,
            cores={
                name: sum(use.cores.get(name, 0.0) * use.seconds for use in uses) / seconds
                for name in names
            },
            machine_busy=sum(use.machine_busy * use.seconds for use in uses) / seconds,
        )

    def describe(self) -> str:
        trees = ", ".join(f"{name} {cores:.2f} cores" for name, cores in self.cores.items())
        return f"{trees}; machine {self.machine_busy:.0%} busy"
