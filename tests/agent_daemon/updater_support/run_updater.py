"""The updater as a real process, for the crash tests:

    python run_updater.py JOB.json

JOB holds the settings, `mode` (`apply` or `resume`), the request for `apply`, and optionally
`kill_at` (a step name) with `kill_occurrence` (default 1): at that step boundary the process
SIGKILLs itself, the hardest stop there is. Otherwise it prints the outcome as JSON.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
from dataclasses import asdict
from pathlib import Path

import httpx

from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from agent_daemon.updater.updater import Updater
from agent_daemon.updater.updater_settings import UpdaterSettings
from ground.clock import SystemClock
from signed_release.keys import load_public_keys


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    seen: dict[str, int] = {}

    def on_step(step: str) -> None:
        seen[step] = seen.get(step, 0) + 1
        if step == job.get("kill_at") and seen[step] == job.get("kill_occurrence", 1):
            os.kill(os.getpid(), signal.SIGKILL)

    settings = UpdaterSettings(
        install_root=Path(job["install_root"]),
        state_dir=Path(job["state_dir"]),
        trusted_keys=load_public_keys([Path(job["public_key"])]),
        platform="linux-x86_64",
        channel="stable",
        restart_command=tuple(job["restart_command"]),
        health_command=tuple(job["health_command"]),
        health_deadline_seconds=job["health_deadline_seconds"],
        health_poll_seconds=0.2,
    )
    with httpx.Client() as client:
        updater = Updater(settings=settings, client=client, clock=SystemClock(), on_step=on_step)
        outcome: UpdateOutcome | None
        if job["mode"] == "apply":
            request = job["request"]
            outcome = updater.apply(
                UpdateRequest(
                    run_id=request["run_id"],
                    manifest=base64.b64decode(request["manifest"]),
                    signature=base64.b64decode(request["signature"]),
                    artifact_url=request["artifact_url"],
                )
            )
        else:
            outcome = updater.resume()
    print(json.dumps(asdict(outcome) if outcome is not None else None, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
