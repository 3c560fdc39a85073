"""A tiny stand-in for systemd's `Restart=always` unit of the managed agent, run as a real process:

    python supervisor.py INSTALL_ROOT HEARTBEAT PIDFILE

It runs INSTALL_ROOT/current/bin/provibr-agent (resolving `current` at every start), restarts it
on SIGHUP (`kill -HUP <pid>` is the test's restart command) and whenever it exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    install_root, heartbeat, pidfile = (Path(arg) for arg in argv)
    restart = [False]
    stop = [False]
    signal.signal(signal.SIGHUP, lambda *_: restart.__setitem__(0, True))
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    child: subprocess.Popen[bytes] | None = None
    pidfile.write_text(f"{os.getpid()}\n")
    while not stop[0]:
        if restart[0] and child is not None:
            child.terminate()
            child.wait()
            child = None
        restart[0] = False
        if child is not None and child.poll() is not None:
            child = None
            time.sleep(0.2)
        if child is None:
            program = install_root / "current/bin/provibr-agent"
            if program.exists():
                child = subprocess.Popen([program, "run", "--heartbeat", str(heartbeat)])
        time.sleep(0.05)
    if child is not None:
        child.terminate()
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
