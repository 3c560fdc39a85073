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
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nachtwacht.cli", *args]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NACHTWACHT_")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")] if p
    )
    return env


def footprint(pid: int) -> tuple[float, int]:
    """CPU seconds so far and peak RSS in bytes of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return cpu, peak


def measure(process: subprocess.Popen[str], seconds: float) -> tuple[float, int]:
    start_cpu, _ = footprint(process.pid)
    time.sleep(seconds)
    end_cpu, peak = footprint(process.pid)
    return end_cpu - start_cpu, peak


def start_control_plane(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        command(
            "control", "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir)
        ),
        env=environment(),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "ready at " in line:
            url = line.split("ready at ", 1)[1].strip()
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return process, url
    raise SystemExit("the control plane did not start")


def admin(data_dir: Path, *args: str) -> dict[str, str]:
    result = subprocess.run(
        command("control", *args, "--json", "--data-dir", str(data_dir)),
        env=environment(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    answer: dict[str, str] = json.loads(result.stdout)
    return answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="idle time to measure")
    args = parser.parse_args()

    from signed_release import generate_key_files

    with tempfile.TemporaryDirectory(prefix="nachtwacht-footprint-") as temp:
        root = Path(temp)
        data_dir = root / "pg"
        plane, url = start_control_plane(data_dir)
        daemon: subprocess.Popen[str] | None = None
        baseline: subprocess.Popen[str] | None = None
        try:
            org = admin(data_dir, "create-org", "Bench")
            agent = admin(data_dir, "enroll-agent", "--org", org["org_id"], "--name", "idle")
            _, public_key, _ = generate_key_files(root / "keys")
            state_dir = root / "state"
            subprocess.run(
                command(
                    "agent",
                    "enroll",
                    "--state-dir",
                    str(state_dir),
                    "--url",
                    url,
                    "--credential",
                    agent["agent_key"],
                    "--trusted-key",
                    str(public_key),
                    "--install-root",
                    str(root / "install"),
                    "--restart-command",
                    "true",
                ),
                env=environment(),
                cwd=REPO_ROOT,
                check=True,
                capture_output=True,
            )
            daemon = subprocess.Popen(
                command("agent", "run", "--state-dir", str(state_dir)),
                env=environment(),
                cwd=REPO_ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            baseline = subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(1e9)"], text=True
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
        finally:
            for process in (daemon, baseline, plane):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(timeout=60)

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
