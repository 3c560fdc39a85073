"""Builds of the updater for the tests, and a stand-in for systemd's handling of its unit.

A build here is what a real one is on a host — a `nachtwacht_agent-<v>-py3-none-any.whl` in a
wheels folder, installed by the product's `install_build` (a venv, `pip install --no-index`) — but
the wheel is a small one made here rather than by `bin/package`: `bin/package` needs every
dependency as a registry wheel (a network download) and takes minutes, while these take a second
and differ only in what `python -m nachtwacht` does:

    good            this checkout's real daemon (a `.pth` puts the checkout and its installed
                    dependencies on the build's path)
    exits_at_start  exits 3 at once, before any of the daemon's code runs
    never_polls     the real daemon with a config naming a control plane nobody listens on
    crash_loop      the same, but it dies 2 s after it started
    killable        the real daemon, SIGKILLed once at the step a marker file names (`KILL_STEPS`)

`Unit` plays systemd for nachtwacht-agent.service: ExecStartPre (the guard's `pre-start`), then
`<own root>/current/venv/bin/python -m nachtwacht agent run`, and `Restart=always` with a short
`RestartSec`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import signal
import site
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from agent_daemon.host.event_log import parse_line
from agent_daemon.self_update.own_builds import install_build
from agent_daemon.updater.layout import InstallLayout
from tests.worlds.processes import REPO_ROOT, child_environment

OLD, NEW, OLDER = "1.0.0", "2.0.0", "0.9.0"
GUARD = REPO_ROOT / "packaging" / "self-update" / "guard.sh"
RESTART_SECONDS = 0.5

_FAKE_MAIN = {
    "exits_at_start": "import sys\nsys.exit(3)\n",
    "never_polls": (
        "import sys\n"
        "from agent_daemon.commands.cli import main\n"
        "sys.exit(main([*sys.argv[2:], '--config', {config!r}]))\n"
    ),
    "crash_loop": (
        "import os, sys, threading\n"
        "from agent_daemon.commands.cli import main\n"
        "threading.Timer(2.0, os._exit, (70,)).start()\n"
        "sys.exit(main([*sys.argv[2:], '--config', {config!r}]))\n"
    ),
    "killable": (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from agent_daemon.self_update import host_install, pending_switch, seam\n"
        "from agent_daemon.commands.cli import main\n"
        "MARKER = Path({marker!r})\n"
        "def die_at(step):\n"
        "    try:\n"
        "        wanted = MARKER.read_text().strip()\n"
        "    except FileNotFoundError:\n"
        "        return\n"
        "    if wanted == step:\n"
        "        MARKER.unlink()\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "def after(owner, name, step):\n"
        "    original = getattr(owner, name)\n"
        "    def wrapped(*args, **kwargs):\n"
        "        result = original(*args, **kwargs)\n"
        "        die_at(step)\n"
        "        return result\n"
        "    setattr(owner, name, wrapped)\n"
        "def before(owner, name, step):\n"
        "    original = getattr(owner, name)\n"
        "    def wrapped(*args, **kwargs):\n"
        "        die_at(step)\n"
        "        return original(*args, **kwargs)\n"
        "    setattr(owner, name, wrapped)\n"
        "after(seam, 'download_artifact', 'download')\n"
        "after(host_install, 'unpack_build', 'unpack')\n"
        "after(host_install, 'switch', 'switch')\n"
        "before(host_install.HostSelfInstall, 'restart', 'restart')\n"
        "before(pending_switch.SelfUpdateCheckIn, 'commit', 'before_commit')\n"
        "sys.exit(main(sys.argv[2:]))\n"
    ),
}
# Where a `killable` build dies (the marker file's content): after the bundle was downloaded,
# after it was unpacked, after `current` moved (before the daemon saved the claim's end), instead
# of asking for the restart, and (the new build) right before it commits.
KILL_STEPS = ("download", "unpack", "switch", "restart", "before_commit")


def make_wheel(
    wheels: Path,
    version: str,
    kind: str,
    *,
    wrong_config: Path | None = None,
    marker: Path | None = None,
) -> Path:
    """A `nachtwacht_agent` wheel of `version` whose `python -m nachtwacht` behaves as `kind`."""
    paths = [str(REPO_ROOT), *site.getsitepackages()]
    files: dict[str, str] = {"nachtwacht_checkout.pth": "\n".join(paths) + "\n"}
    if kind != "good":
        # The build's own `nachtwacht` comes before the checkout's (site-packages is searched
        # before the folders a .pth appends); `agent_daemon` is the checkout's.
        files["nachtwacht/__init__.py"] = ""
        files["nachtwacht/__main__.py"] = _FAKE_MAIN[kind].format(
            config=str(wrong_config), marker=str(marker)
        )
    dist_info = f"nachtwacht_agent-{version}.dist-info"
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: nachtwacht-agent\nVersion: {version}\n"
    )
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    wheels.mkdir(parents=True, exist_ok=True)
    path = wheels / f"nachtwacht_agent-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def bundle_bytes(wheel: Path, version: str) -> bytes:
    """The offline bundle `bin/package` makes, reduced to what the updater reads of it."""
    top = f"nachtwacht-agent-bundle-{version}-linux-x86_64"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for folder in (top, f"{top}/wheels"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            archive.addfile(info)
        for name, data, mode in (
            (f"{top}/install.sh", b"#!/bin/sh\nexit 0\n", 0o755),
            (f"{top}/wheels/{wheel.name}", wheel.read_bytes(), 0o644),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def install(own_root: Path, wheels_root: Path, version: str, kind: str, **kw: Path) -> Path:
    wheels = wheels_root / version
    make_wheel(wheels, version, kind, **kw)
    return install_build(own_root=own_root, wheels=wheels, version=version, python=sys.executable)


def links(layout: InstallLayout) -> tuple[str | None, str | None]:
    return layout.link_target("current"), layout.link_target("previous")


def run_guard(mode: str, state_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(GUARD), mode, "--state-dir", str(state_dir), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@dataclass
class Start:
    """One start of the unit: the build `current` named, the daemon's lines, its exit."""

    build: str
    process: subprocess.Popen[bytes]
    stdout_path: Path
    guard_stderr: str

    def events(self) -> list[dict[str, object]]:
        found = []
        for line in self.stdout_path.read_text(errors="replace").splitlines():
            try:
                found.append(parse_line(line))
            except ValueError:
                continue
        return found

    def event_names(self) -> list[str]:
        return [str(e.get("event")) for e in self.events()]


@dataclass
class Unit:
    """nachtwacht-agent.service without systemd (see the module's docstring)."""

    own_root: Path
    state_dir: Path
    logs: Path
    env: dict[str, str]
    starts: list[Start] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, daemon=True)

    @classmethod
    def for_host(cls, own_root: Path, state_dir: Path, logs: Path, **extra: str) -> Unit:
        env = child_environment(extra)
        # The build's own path only: nothing of this checkout unless the build puts it there.
        env.pop("PYTHONPATH", None)
        logs.mkdir(parents=True, exist_ok=True)
        return cls(own_root=own_root, state_dir=state_dir, logs=logs, env=env)

    @property
    def pid_file(self) -> Path:
        return self.logs / "main.pid"

    def start(self) -> Unit:
        self._thread.start()
        return self

    def _supervise(self) -> None:
        while not self._stop.is_set():
            guard = run_guard("pre-start", self.state_dir)
            build = os.readlink(self.own_root / "current").rpartition("/")[2]
            stdout_path = self.logs / f"start-{len(self.starts)}-{build}.out"
            with stdout_path.open("wb") as out:
                process = subprocess.Popen(
                    [
                        str(self.own_root / "current" / "venv" / "bin" / "python"),
                        "-m",
                        "nachtwacht",
                        "agent",
                        "run",
                        "--state-dir",
                        str(self.state_dir),
                    ],
                    env=self.env,
                    cwd=self.logs,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            with self._lock:
                self.starts.append(Start(build, process, stdout_path, guard.stderr))
            self.pid_file.write_text(f"{process.pid}\n")
            process.wait()
            self._stop.wait(RESTART_SECONDS)

    def restart(self) -> None:
        """`systemctl restart`: the main process is stopped, the supervisor starts it again."""
        with self._lock:
            last = self.starts[-1] if self.starts else None
        if last is not None and last.process.poll() is None:
            last.process.send_signal(signal.SIGTERM)

    def restart_command(self) -> str:
        return f"kill -TERM $(cat {self.pid_file})"

    def last(self) -> Start:
        with self._lock:
            return self.starts[-1]

    def wait_until(self, what: str, condition: object, *, seconds: float = 120.0) -> None:
        assert callable(condition)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.2)
        summary = [(s.build, s.process.poll(), s.event_names()[-5:]) for s in self.starts]
        raise AssertionError(f"not within {seconds:g} s: {what}; starts: {summary}")

    def stop(self) -> None:
        self._stop.set()
        # The supervisor may be between the guard and a start: stop what it starts until it ends.
        while True:
            with self._lock:
                starts = list(self.starts)
            for started in starts:
                if started.process.poll() is None:
                    started.process.send_signal(signal.SIGTERM)
                    try:
                        started.process.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        started.process.kill()
                        started.process.wait()
            self._thread.join(timeout=1)
            if not self._thread.is_alive():
                return
