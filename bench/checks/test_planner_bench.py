"""bench/planner.py keeps running: a tiny fleet, a real process, the tables it prints.

Speed is not asserted here (the machine is shared); only that the benchmark works and that its
daylight-saving comparison covers every case of the planner's tables.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.shared_planner.test_daylight_saving import DUE_CASES, RESOLVE_CASES, SLOT_CASES

REPO = Path(__file__).resolve().parents[2]


def test_the_benchmark_prints_both_rates_a_ratio_and_every_dst_case() -> None:
    done = subprocess.run(
        [sys.executable, "bench/planner.py", "--agents", "300", "--peer-agents", "60"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    out = done.stdout
    assert re.search(r"^\| `due_slot`, wall times cached .* \| 300 \| [\d,]+ \|$", out, re.M)
    assert re.search(r"^\| APScheduler 3 .* \| 60 \(sample\) \| [\d,]+ \|$", out, re.M)
    assert re.search(r"^ratio: due_slot is [\d.]+x the peer", out, re.M)
    assert "agrees on due or not for 60 of 60" in out
    total = len(RESOLVE_CASES) + len(SLOT_CASES) + len(DUE_CASES)
    assert re.search(rf"^\| all \| {total} \| \d+ \|$", out, re.M)
