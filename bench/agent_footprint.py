"""The agent daemon's footprint while idle: peak RSS and CPU seconds per hour.

Starts a local control plane (`nachtwacht control serve` on an embedded PostgreSQL in a temporary
directory), enrolls an agent, runs `nachtwacht agent run` for `--seconds` (default 120) with
nothing to do, and reads the daemon's peak RSS (VmHWM) and CPU time (utime + stime) from /proc.
The baseline, measured in the same run for the same time, is a bare `python -c` sleeping process;
the ratio says what the daemon costs beyond an idle interpreter.

    PYTHONPATH=. .venv/bin/python bench/agent_footprint.py [--seconds 120]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from nachtwacht.worlds.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.worlds.daemons import launch_daemon
from nachtwacht.worlds.hosts import AgentHost
from nachtwacht.worlds.processes import child_environment

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def footprint(pid: int) -> tuple[float, int]:
    """CPU seconds so far and peak RSS in bytes of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return cpu, peak


def measure(process: subprocess.Popen[bytes], seconds: float) -> tuple[float, int]:
    start_cpu, _ = footprint(process.pid)
    time.sleep(seconds)
    end_cpu, peak = footprint(process.pid)
    return end_cpu - start_cpu, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="idle time to measure")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="nachtwacht-footprint-") as temp:
        root = Path(temp)
        plane: RunningControlPlane | None = None
        daemon: subprocess.Popen[bytes] | None = None
        baseline: subprocess.Popen[bytes] | None = None
        try:
            plane = start_control_plane(
                stderr_path=root / "control-plane.log", data_dir=root / "pg"
            )
            org = plane.create_org("Bench")
            agent = plane.enroll_agent(org["org_id"], "idle")
            host = AgentHost(root / "host")
            enrolled = host.enroll(plane.base_url, agent["agent_key"])
            if enrolled.returncode != 0:
                raise SystemExit(f"nachtwacht agent enroll failed: {enrolled.stderr}")
            daemon = launch_daemon(
                host.state_dir,
                env=child_environment(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            baseline = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1e9)"])
            time.sleep(5)  # both past their start-up before the measured window
            results: dict[str, tuple[float, int]] = {}
            threads = [
                threading.Thread(
                    target=lambda n, p: results.__setitem__(n, measure(p, args.seconds)),
                    args=(name, process),
                )
                for name, process in (("daemon", daemon), ("baseline", baseline))
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            for process in (daemon, baseline):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(timeout=60)
            if plane is not None:
                plane.stop()

    hour = 3600.0 / args.seconds
    print(f"agent daemon idle footprint over {args.seconds:g} s (same run, same machine)")
    print(f"{'process':<26} {'peak RSS (MiB)':>15} {'CPU s / hour':>13}")
    for name, label in (
        ("daemon", "nachtwacht agent run"),
        ("baseline", "python -c sleep (baseline)"),
    ):
        cpu, peak = results[name]
        print(f"{label:<26} {peak / 2**20:>15.1f} {cpu * hour:>13.3f}")
    d_cpu, d_peak = results["daemon"]
    b_cpu, b_peak = results["baseline"]
    print(
        f"ratio daemon/baseline: RSS {d_peak / b_peak:.1f}x, CPU {d_cpu * hour:.3f} s/h vs "
        f"{b_cpu * hour:.3f} s/h" + (f" ({d_cpu / b_cpu:.0f}x)" if b_cpu > 0 else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
