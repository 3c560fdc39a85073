"""Reads timed on two servers at once: this code's and a baseline's (another source tree, e.g.
main's, serving the same database), each read taken on both back to back, which one first
alternating from turn to turn, so a machine that slows down slows both alike. With one server
it is the plain median of every read beside the first (the `/healthz` baseline).

Used by `bench/fleet_views.py --baseline DIR`.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Protocol

import httpx

__all__ = ["measure_beside", "report_beside"]


class Read(Protocol):
    """A bench's read: its label, the request, the median it must stay under."""

    @property
    def label(self) -> str: ...

    @property
    def target_ms(self) -> float: ...

    def get(self) -> httpx.Response: ...


def measure_beside(sides: list[list[Read]], repeats: int) -> list[dict[str, list[float]]]:
    """Each read once to warm up, then `repeats` turns through all of them (so a machine that
    slows down mid-run slows every read alike); with a baseline, each read is taken on both
    servers back to back, which one first alternating from turn to turn."""
    times: list[dict[str, list[float]]] = [{read.label: [] for read in side} for side in sides]
    for turn in range(repeats + 1):
        order = list(range(len(sides)))
        if turn % 2:
            order.reverse()
        for index in range(len(sides[0])):
            for side in order:
                read = sides[side][index]
                started = time.perf_counter()
                answer = read.get()
                elapsed = (time.perf_counter() - started) * 1000
                if answer.status_code != 200:
                    name = "the baseline's " if side else ""
                    raise SystemExit(
                        f"{name}{read.label}: answered {answer.status_code}: {answer.text[:300]}"
                    )
                if turn:
                    times[side][read.label].append(elapsed)
    return times


def report_beside(
    listed: list[Read],
    times: list[dict[str, list[float]]],
    client_cpu: float,
    wall: float,
) -> int:
    ours = times[0]
    base = times[1] if len(times) > 1 else None
    baseline = statistics.median(ours[listed[0].label])
    missed = []
    compared = f" {'baseline ms':>12} {'x baseline':>11}" if base is not None else ""
    print(
        f"{'read':36} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x /healthz':>11}"
        f"{compared}  target"
    )
    for read in listed:
        median = statistics.median(ours[read.label])
        within = median < read.target_ms
        if not within and read is not listed[0]:
            missed.append(read.label)
        beside = ""
        if base is not None:
            theirs = statistics.median(base[read.label])
            beside = f" {theirs:12.1f} {median / theirs:11.2f}"
        print(
            f"{read.label:36} {median:10.1f} {min(ours[read.label]):8.1f}"
            f" {max(ours[read.label]):8.1f} {median / baseline:11.1f}{beside}"
            f"  < {read.target_ms:.0f} ms {'ok' if within else 'MISSED'}"
        )
    print(f"client CPU: {client_cpu:.1f} s over {wall:.1f} s of reads ({client_cpu / wall:.0%})")
    # The targets are absolute, so a shared machine's load shows beside them.
    one, five, _ = os.getloadavg()
    print(f"machine load average: {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores")
    if missed:
        print("missed targets: " + ", ".join(missed))
        return 1
    print("every read within its target")
    return 0
