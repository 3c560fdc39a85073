"""The panel benches' one way to time reads: a signed-in panel client, turns through every read
(one warm-up turn, not counted) and a report of each read's median beside a baseline's.

The first read of a list is the baseline (`/healthz`, read in the same turns): every figure is
also printed as a ratio to it, so a run on a loaded machine says so. Used by
`bench/fleet_views.py` and `bench/panel_scale.py`.
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


def measure(listed: list[Read], repeats: int) -> dict[str, list[float]]:
    """One turn to warm up, then `repeats` turns through every read (so a machine that slows
    down mid-run slows every read alike): each read's times in milliseconds."""
    times: dict[str, list[float]] = {read.label: [] for read in listed}
    for turn in range(repeats + 1):
        for read in listed:
            started = time.perf_counter()
            answer = read.get()
            elapsed = (time.perf_counter() - started) * 1000
            if answer.status_code != 200:
                raise SystemExit(
                    f"{read.label}: answered {answer.status_code}: {answer.text[:300]}"
                )
            if turn:
                times[read.label].append(elapsed)
    return times


def report(
    listed: list[Read], times: dict[str, list[float]], client_cpu: float, wall: float
) -> int:
    """Each read's median, min and max and its ratio to the baseline's median (the first read),
    the client's CPU and the machine's load; 1 when a read misses its target, else 0."""
    baseline = statistics.median(times[listed[0].label])
    width = max(len(read.label) for read in listed) + 1
    missed = []
    print(
        f"{'read':{width}} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x /healthz':>11}  target"
    )
    for read in listed:
        median = statistics.median(times[read.label])
        within = median < read.target_ms
        if not within and read is not listed[0]:
            missed.append(read.label)
        print(
            f"{read.label:{width}} {median:10.1f} {min(times[read.label]):8.1f}"
            f" {max(times[read.label]):8.1f} {median / baseline:11.1f}"
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
