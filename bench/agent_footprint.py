"""The agent daemon's footprint while idle: peak RSS and CPU seconds per hour.

Starts a local control plane (`nachtwacht control serve` on an embedded PostgreSQL in a temporary
directory), enrolls an agent, runs the daemon for `--seconds` (default 120) with nothing to do,
and reads its peak RSS (VmHWM) and CPU time (utime + stime) from /proc. The daemon starts as the
shipped unit starts it (packaging/systemd/nachtwacht-agent.service): the venv's `nachtwacht`
script, `agent run` without flags, no PYTHONPATH, the unit's `Environment=` lines, the state and
configuration directories in STATE_DIRECTORY / CONFIGURATION_DIRECTORY, and a NOTIFY_SOCKET with
WATCHDOG_USEC (read and drained here) for its READY/STATUS/WATCHDOG messages. The baseline,
measured in the same run for the same time, is a bare `python -c` sleeping process; the ratio
says what the daemon costs beyond an idle interpreter. At the end `--smaps` prints where the
daemon's memory is (/proc/PID/smaps, by mapping).

    PYTHONPATH=. .venv/bin/python bench/agent_footprint.py [--seconds 120]
"""

from __future__ import annotations

import argparse
import collections
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from nachtwacht.worlds.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.worlds.hosts import AgentHost
from nachtwacht.worlds.processes import REPO_ROOT, child_environment

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
UNIT_FILE = REPO_ROOT / "packaging" / "systemd" / "nachtwacht-agent.service"
# The unit's WatchdogSec=3min, as systemd passes it.
WATCHDOG_USEC = "180000000"


def unit_environment(unit_file: Path = UNIT_FILE) -> dict[str, str]:
    """The `Environment=NAME=value` lines of the shipped unit (simple assignments only)."""
    found: dict[str, str] = {}
    for line in unit_file.read_text().splitlines():
        if line.startswith("Environment="):
            for assignment in line.removeprefix("Environment=").split():
                name, _, value = assignment.strip('"').partition("=")
                found[name] = value
    return found


def launch_as_unit(state_dir: Path, notify_socket: str) -> subprocess.Popen[bytes]:
    """`ExecStart=…/venv/bin/nachtwacht agent run` with the environment systemd would give it."""
    env = child_environment()
    env.pop("PYTHONPATH", None)  # the unit has none: the venv's own packages are imported
    env.update(unit_environment())
    env.update(
        STATE_DIRECTORY=str(state_dir),
        CONFIGURATION_DIRECTORY=str(state_dir),
        NOTIFY_SOCKET=notify_socket,
        WATCHDOG_USEC=WATCHDOG_USEC,
    )
    script = Path(sys.executable).parent / "nachtwacht"
    return subprocess.Popen(
        [str(script), "agent", "run"],
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def drain(sock: socket.socket) -> None:
    """Read the daemon's sd_notify datagrams as systemd would (their content is not needed)."""
    while True:
        try:
            sock.recv(4096)
        except OSError:
            return


def memory_by_mapping(pid: int) -> list[tuple[str, int]]:
    """RSS in bytes per mapped file (anonymous memory and the heap by name), largest first."""
    sizes: collections.Counter[str] = collections.Counter()
    name = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            name = fields[5] if len(fields) > 5 else "[anon]"
        elif fields and fields[0] == "Rss:":
            sizes[name] += int(fields[1]) * 1024
    return sizes.most_common()


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
    parser.add_argument("--smaps", action="store_true", help="print the daemon's RSS by mapping")
    args = parser.parse_args()
    mappings: list[tuple[str, int]] = []

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
            notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            notify.bind(str(root / "notify.sock"))
            threading.Thread(target=drain, args=(notify,), daemon=True).start()
            daemon = launch_as_unit(host.state_dir, str(root / "notify.sock"))
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
            if args.smaps:
                mappings = memory_by_mapping(daemon.pid)
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
    for name, size in mappings[:12]:
        print(f"  {size / 2**20:6.1f} MiB  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
