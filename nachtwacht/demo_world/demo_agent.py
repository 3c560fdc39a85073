"""A tiny but real agent build for the demo, the tests and the benchmarks.

`bin/provibr-agent` is a Python script. `provibr-agent --version` prints its version;
`provibr-agent [run] [--heartbeat FILE]` runs as a service and rewrites FILE every half second with
its version and pid; `provibr-agent health [--heartbeat FILE] [--max-age S]` succeeds and prints the
*running* service's version when that file is fresh and its process alive — so a health check after
a restart proves which build actually runs, not which one `current` points at.
The heartbeat path defaults to `$PROVIBR_AGENT_HEARTBEAT`, else /run/provibr-agent/heartbeat.json.

A `fault` makes a deliberately broken build: `wrong-version` (the self-test prints another
version), `never-healthy` (runs but never writes a heartbeat), `crash` (exits at once).
"""

from __future__ import annotations

import gzip
import io
import random
import tarfile
from pathlib import Path
from typing import Literal, get_args

__all__ = ["FAULTS", "Fault", "agent_script", "build_demo_agent"]

Fault = Literal["none", "wrong-version", "never-healthy", "crash"]
FAULTS: tuple[str, ...] = get_args(Fault)
# A fixed timestamp makes two builds of one version byte-identical.
_BUILD_MTIME = 1_767_225_600

_SCRIPT = '''#!/usr/bin/env python3
"""provibr-agent {version}: a demo build made by `nachtwacht release build-demo-agent`."""
import json
import os
import signal
import sys
import time

VERSION = {version!r}
FAULT = {fault!r}
DEFAULT_HEARTBEAT = "/run/provibr-agent/heartbeat.json"


def option(args, name, default):
    if name in args:
        index = args.index(name)
        if index + 1 < len(args):
            return args[index + 1]
    return default


def write_heartbeat(path):
    temp = path + ".tmp"
    with open(temp, "w") as stream:
        json.dump({{"version": VERSION, "pid": os.getpid(), "time": time.time()}}, stream)
    os.replace(temp, path)


def serve(path):
    if FAULT == "crash":
        print("provibr-agent " + VERSION + ": crashing on purpose (demo fault)", file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    signal.signal(signal.SIGINT, lambda *_: running.__setitem__(0, False))
    print("provibr-agent " + VERSION + " running, heartbeat " + path, flush=True)
    while running[0]:
        if FAULT != "never-healthy":
            write_heartbeat(path)
        time.sleep(0.5)
    try:
        with open(path) as stream:
            if json.load(stream).get("pid") == os.getpid():
                os.remove(path)
    except (OSError, ValueError):
        pass
    return 0


def health(path, max_age):
    try:
        with open(path) as stream:
            beat = json.load(stream)
    except (OSError, ValueError) as exc:
        print("unhealthy: no heartbeat at " + path + " (" + str(exc) + ")", file=sys.stderr)
        return 1
    try:
        os.kill(int(beat["pid"]), 0)
    except PermissionError:
        pass
    except (OSError, KeyError, ValueError):
        print("unhealthy: the process that wrote " + path + " is gone", file=sys.stderr)
        return 1
    age = time.time() - float(beat.get("time", 0))
    if age > max_age:
        print("unhealthy: heartbeat is %.1f s old (limit %.1f s)" % (age, max_age), file=sys.stderr)
        return 1
    print(beat.get("version"))
    return 0


def main(args):
    if "--version" in args:
        print("9.9.9-wrong" if FAULT == "wrong-version" else VERSION)
        return 0
    path = option(args, "--heartbeat", os.environ.get("PROVIBR_AGENT_HEARTBEAT", DEFAULT_HEARTBEAT))
    if args[:1] == ["health"]:
        return health(path, float(option(args, "--max-age", "5")))
    if args[:1] in ([], ["run"]) or args[:1] == ["--heartbeat"]:
        return serve(path)
    print("usage: provibr-agent [--version | run | health] [--heartbeat FILE]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def agent_script(version: str, fault: Fault = "none") -> str:
    return _SCRIPT.format(version=version, fault=fault)


def _add_file(archive: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = _BUILD_MTIME
    info.uname = info.gname = "root"
    archive.addfile(info, io.BytesIO(data))


def _add_dir(archive: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = _BUILD_MTIME
    archive.addfile(info)


def build_demo_agent(
    out: Path, *, version: str, fault: Fault = "none", padding_bytes: int = 0
) -> Path:
    """Write the build to `out`; `padding_bytes` of random filler make it realistically big."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        _add_dir(archive, "bin")
        _add_file(archive, "bin/provibr-agent", agent_script(version, fault).encode(), 0o755)
        _add_file(archive, "VERSION", f"{version}\n".encode(), 0o644)
        if padding_bytes:
            # Not a secret: seeded so a build is reproducible, random so gzip cannot shrink it.
            payload = random.Random(version).randbytes(padding_bytes)  # noqa: S311
            _add_dir(archive, "share")
            _add_file(archive, "share/payload.bin", payload, 0o644)
    out.parent.mkdir(parents=True, exist_ok=True)
    with (
        out.open("wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as compressed,
    ):
        compressed.write(buffer.getvalue())
    return out
