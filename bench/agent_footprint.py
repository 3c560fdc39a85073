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

Systemd gives a service none of the caller's environment, so no `PYTHON*` variable of whoever runs
the bench reaches the daemon (a developer's PYTHONDONTWRITEBYTECODE would make it compile every
module from source), and the project's modules are byte-compiled first, as `pip install` does.

When the peak happens: the daemon's VmRSS and VmHWM are sampled from its launch (every 50 ms for
the first 15 s, then every half second); the bench prints each step of the peak with its moment
beside READY=1, the RSS at the end of each minute, and the RSS at the end (steady) beside the peak
(the difference is a transient).

`--tls` puts the control plane behind TLS on loopback, with a private CA that the agent adds to
the host's trust store (`--ca-file`), as a customer's agent talks to an https control plane.

`--env NAME=VALUE` adds a variable to the daemon's environment, to measure a setting before the
unit gets it (e.g. `--env MALLOC_ARENA_MAX=1`).

`--speed N` runs the control plane and the daemon on a shared fake clock N times as fast as real
time, so `--seconds 600 --speed 60` is ten idle hours — 600 config polls — to see whether the RSS
creeps. Product time starts at 03:30 UTC, after the default 03:00 slot (Amsterdam's, 01:00 or
02:00 UTC), so the next slot is more than 20 product hours away. CPU is then per product hour.

`--venv DIR` runs the daemon (and the baseline) from another venv, e.g. one made as a customer
host makes it — only the `agent` extra, not editable, so none of the developer's packages (in the
developer's venv, `rich` and `click` beside httpx make httpx import its command-line tool, a few
MiB that no customer host holds):

    python3 -m venv /tmp/agent-venv && /tmp/agent-venv/bin/pip install '.[agent]'
    PYTHONPATH=. .venv/bin/python bench/agent_footprint.py --venv /tmp/agent-venv

Usage (docs/agent_daemon.md, "Footprint", has the latest figures):

    PYTHONPATH=. .venv/bin/python bench/agent_footprint.py [--seconds 120] [--tls] [--smaps]
        [--venv DIR] [--env NAME=VALUE] [--speed N]
"""

from __future__ import annotations

import argparse
import collections
import compileall
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from tests.agent_daemon.network_support.fronts import control_plane_front
from tests.worlds.hosts import AgentHost
from tests.worlds.processes import REPO_ROOT, child_environment

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
UNIT_FILE = REPO_ROOT / "packaging" / "systemd" / "nachtwacht-agent.service"
# The unit's WatchdogSec=3min, as systemd passes it.
WATCHDOG_USEC = "180000000"
# What `pip install` byte-compiles of this project (pyproject's packages.find).
PACKAGES = (
    "ground",
    "shared_planner",
    "agent_daemon",
    "control_plane",
    "signed_release",
    "nachtwacht",
)


def unit_environment(unit_file: Path = UNIT_FILE) -> dict[str, str]:
    """The `Environment=NAME=value` lines of the shipped unit (simple assignments only)."""
    found: dict[str, str] = {}
    for line in unit_file.read_text().splitlines():
        if line.startswith("Environment="):
            for assignment in line.removeprefix("Environment=").split():
                name, _, value = assignment.strip('"').partition("=")
                found[name] = value
    return found


def launch_as_unit(
    state_dir: Path, notify_socket: str, venv: Path, extra_env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """`ExecStart=…/venv/bin/nachtwacht agent run` with the environment systemd would give it."""
    env = {
        name: value
        for name, value in child_environment().items()
        # The unit has no PYTHONPATH (the venv's own packages are imported) and systemd passes
        # none of the caller's PYTHON* settings.
        if not name.startswith("PYTHON")
    }
    env.update(unit_environment())
    env.update(extra_env)
    env.update(
        STATE_DIRECTORY=str(state_dir),
        CONFIGURATION_DIRECTORY=str(state_dir),
        NOTIFY_SOCKET=notify_socket,
        WATCHDOG_USEC=WATCHDOG_USEC,
    )
    script = venv / "bin" / "nachtwacht"
    return subprocess.Popen(
        [str(script), "agent", "run"],
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def compile_like_pip() -> None:
    """The project's modules byte-compiled, as a wheel installed by pip has them (into the
    checkout's `__pycache__` folders, which git ignores)."""
    for package in PACKAGES:
        compileall.compile_dir(REPO_ROOT / package, quiet=1)


@dataclass
class Notifications:
    """The daemon's sd_notify datagrams, read as systemd would; when READY=1 came."""

    launched: float = 0.0
    ready_after: float | None = None

    def drain(self, sock: socket.socket) -> None:
        while True:
            try:
                message = sock.recv(4096)
            except OSError:
                return
            if self.ready_after is None and b"READY=1" in message.split(b"\n"):
                self.ready_after = time.monotonic() - self.launched


@dataclass
class Samples:
    """(seconds since launch, VmRSS, VmHWM) of one process, from its launch to the end."""

    launched: float
    rows: list[tuple[float, int, int]] = field(default_factory=list)

    def follow(self, pid: int, stop: threading.Event) -> None:
        while not stop.is_set():
            after = time.monotonic() - self.launched
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                return
            sizes = {
                line.split(":")[0]: int(line.split()[1]) * 1024
                for line in status.splitlines()
                if line.startswith(("VmRSS:", "VmHWM:"))
            }
            if "VmRSS" in sizes:
                self.rows.append((after, sizes["VmRSS"], sizes["VmHWM"]))
            stop.wait(0.05 if after < 15 else 0.5)

    def peak_steps(self, step: int = 2**20) -> list[tuple[float, int, int]]:
        """The samples where the peak had grown by `step` since the last one shown, and the
        sample where it reached its final value."""
        shown: list[tuple[float, int, int]] = []
        for row in self.rows:
            if not shown or row[2] >= shown[-1][2] + step:
                shown.append(row)
        final = next(row for row in self.rows if row[2] == self.rows[-1][2])
        if final not in shown:
            shown.append(final)
        return sorted(shown)


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


def print_timeline(samples: Samples, ready_after: float | None) -> None:
    """When the peak grew, beside READY=1; the end's RSS (steady) beside the peak."""
    ready = "never" if ready_after is None else f"{ready_after:.2f} s"
    print(f"daemon peak over time (READY=1 at {ready} after launch):")
    for after, rss, peak in samples.peak_steps():
        print(f"  {after:7.2f} s   peak {peak / 2**20:5.1f} MiB   RSS {rss / 2**20:5.1f} MiB")
    minutes = [
        next(rss for after, rss, _ in reversed(samples.rows) if after <= minute * 60)
        for minute in range(1, int(samples.rows[-1][0] // 60) + 1)
    ]
    if minutes:
        shown = " ".join(f"{rss / 2**20:.1f}" for rss in minutes)
        print(f"RSS at the end of each minute (MiB): {shown}")
    _, end_rss, end_peak = samples.rows[-1]
    print(
        f"steady RSS at the end {end_rss / 2**20:.1f} MiB, peak {end_peak / 2**20:.1f} MiB "
        f"(a start-up transient of {(end_peak - end_rss) / 2**20:.1f} MiB)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="idle time to measure")
    parser.add_argument("--tls", action="store_true", help="the control plane behind TLS")
    parser.add_argument("--smaps", action="store_true", help="print the daemon's RSS by mapping")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the daemon beyond the unit's (to measure a setting)",
    )
    parser.add_argument(
        "--venv",
        type=Path,
        default=Path(sys.executable).parent.parent,
        help="the venv whose `nachtwacht` runs (default: this one; see the module docstring)",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="a fake clock this many times as fast as real time (hours of polls in minutes)",
    )
    args = parser.parse_args()
    fake_clock = (
        f"2026-12-02T03:30:00Z,anchor={time.time():.1f},speed={args.speed:g}"
        if args.speed != 1.0
        else None
    )
    clock_env = {"NACHTWACHT_FAKE_CLOCK": fake_clock} if fake_clock else {}
    mappings: list[tuple[str, int]] = []
    if args.venv.resolve() == Path(sys.executable).parent.parent.resolve():
        compile_like_pip()

    with tempfile.TemporaryDirectory(prefix="nachtwacht-footprint-") as temp:
        root = Path(temp)
        plane: RunningControlPlane | None = None
        daemon: subprocess.Popen[bytes] | None = None
        baseline: subprocess.Popen[bytes] | None = None
        stop_sampling = threading.Event()
        with contextlib.ExitStack() as stack:
            try:
                plane = start_control_plane(
                    stderr_path=root / "control-plane.log",
                    data_dir=root / "pg",
                    fake_clock=fake_clock,
                )
                org = plane.create_org("Bench")
                agent = plane.enroll_agent(org["org_id"], "idle")
                url, trust = plane.base_url, []
                if args.tls:
                    front = stack.enter_context(
                        control_plane_front(
                            int(plane.base_url.rsplit(":", 1)[1]), root / "pki", tls=True
                        )
                    )
                    url, trust = front.url, ["--ca-file", str(front.ca_file)]
                host = AgentHost(root / "host")
                enrolled = host.enroll(url, agent["agent_key"], *trust, env=clock_env)
                if enrolled.returncode != 0:
                    raise SystemExit(f"nachtwacht agent enroll failed: {enrolled.stderr}")
                notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                notify.bind(str(root / "notify.sock"))
                notifications = Notifications(launched=time.monotonic())
                threading.Thread(target=notifications.drain, args=(notify,), daemon=True).start()
                daemon = launch_as_unit(
                    host.state_dir,
                    str(root / "notify.sock"),
                    args.venv,
                    clock_env | dict(item.split("=", 1) for item in args.env),
                )
                samples = Samples(launched=notifications.launched)
                sampler = threading.Thread(
                    target=samples.follow, args=(daemon.pid, stop_sampling), daemon=True
                )
                sampler.start()
                baseline = subprocess.Popen(
                    [str(args.venv / "bin" / "python"), "-c", "import time; time.sleep(1e9)"]
                )
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
                stop_sampling.set()
                sampler.join()
                if args.smaps:
                    mappings = memory_by_mapping(daemon.pid)
            finally:
                stop_sampling.set()
                for process in (daemon, baseline):
                    if process is not None and process.poll() is None:
                        process.terminate()
                        process.wait(timeout=60)
                if plane is not None:
                    plane.stop()

    hour = 3600.0 / (args.seconds * args.speed)
    wire = "TLS with a private CA" if args.tls else "plain HTTP"
    span = f"{args.seconds:g} s"
    if fake_clock:
        span += f" at {args.speed:g}x: {args.seconds * args.speed / 3600:.1f} product hours"
    print(f"agent daemon idle footprint over {span} (same run, same machine, {wire})")
    unit = "CPU s / hour" if not fake_clock else "CPU s / product h"
    print(f"{'process':<26} {'peak RSS (MiB)':>15} {unit:>13}")
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
    print_timeline(samples, notifications.ready_after)
    for name, size in mappings[:12]:
        print(f"  {size / 2**20:6.1f} MiB  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
