"""The panel benches' one way to time reads: a signed-in panel client, turns through every read
(one warm-up turn, not counted) and a report of each read's median beside a baseline's.

The first read of a list is the baseline (`/healthz`, read in the same turns): every figure is
also printed as a ratio to it, so a run on a loaded machine says so. A second list of the same
reads on another server (a baseline source tree serving the same database) is timed in the same
turns and printed beside. Used by `bench/fleet_views.py` and `bench/panel_scale.py`.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

__all__ = ["Read", "csrf_of", "measure", "report", "signed_in"]


@dataclass(frozen=True, kw_only=True)
class Read:
    label: str
    get: Callable[[], httpx.Response]
    # The median this read must stay under.
    target_ms: float


def csrf_of(page: str) -> str:
    """The CSRF token a panel page's forms carry."""
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def signed_in(base_url: str, key: str) -> httpx.Client:
    """A client signed in to the panel with `key` (a panel or an operator key)."""
    client = httpx.Client(base_url=base_url, timeout=120, follow_redirects=False)
    form = client.get("/panel/sign-in")
    answer = client.post("/panel/sign-in", data={"key": key, "csrf": csrf_of(form.text)})
    if answer.status_code not in (302, 303):
        raise SystemExit(f"sign-in with the bench's key answered {answer.status_code}")
    return client


def measure(sides: list[list[Read]], repeats: int) -> list[dict[str, list[float]]]:
    """One turn to warm up, then `repeats` turns through every read (so a machine that slows
    down mid-run slows every read alike): each side's times per read, in milliseconds. With two
    sides (this code's server and a baseline tree's on the same database), each read is taken
    on both back to back, which one first alternating from turn to turn."""
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


def report(
    listed: list[Read], times: list[dict[str, list[float]]], client_cpu: float, wall: float
) -> int:
    """Each read's median, min and max and its ratio to the first read's median (`/healthz`),
    and to the baseline tree's median when there is one; the client's CPU and the machine's
    load; 1 when a read misses its target, else 0."""
    ours = times[0]
    base = times[1] if len(times) > 1 else None
    healthz = statistics.median(ours[listed[0].label])
    width = max(len(read.label) for read in listed) + 1
    missed = []
    compared = f" {'baseline ms':>12} {'x baseline':>11}" if base is not None else ""
    print(
        f"{'read':{width}} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x /healthz':>11}"
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
            f"{read.label:{width}} {median:10.1f} {min(ours[read.label]):8.1f}"
            f" {max(ours[read.label]):8.1f} {median / healthz:11.1f}{beside}"
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
