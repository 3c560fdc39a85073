"""Load from `wrk` (a compiled load generator), so the client is not what a benchmark measures.

A Python client tops out near the server's own speed and then reports its own limit as the
server's. wrk is the Debian package `wrk` (`apt-get install wrk`). Every run here:

- replays prepared requests from a Lua script, rotating through real agent credentials, so every
  request is a different agent's (no credential is asked twice in a row);
- counts the answers by status inside wrk, so a run that got 401s or 500s cannot pass for a fast
  refusal path: `WrkRun.expect` raises unless (nearly) every answer has the expected status;
- measures wrk's own CPU time (its rusage as a reaped child), printed beside the requests per
  second: a client near one core per thread is the bottleneck, and the run says so.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Request", "WrkRun", "require_wrk", "run_wrk"]


@dataclass(frozen=True, kw_only=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: str | None = None


@dataclass(frozen=True, kw_only=True)
class WrkRun:
    label: str
    requests: int
    seconds: float
    statuses: dict[int, int]
    socket_errors: dict[str, int]
    p50_ms: float
    p99_ms: float
    client_cpu_seconds: float

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def client_cores(self) -> float:
        """How many cores wrk kept busy on average (1.0 = one core fully)."""
        return self.client_cpu_seconds / self.seconds if self.seconds else 0.0

    def expect(self, status: int) -> WrkRun:
        """This run, if at least 99.9 % of its answers had `status` (and there were answers)."""
        matching = self.statuses.get(status, 0)
        if self.requests == 0 or matching < 0.999 * self.requests:
            raise RuntimeError(
                f"{self.label}: expected HTTP {status}, got {self.statuses} "
                f"(socket errors {self.socket_errors}): this run measured something else"
            )
        return self

    def line(self) -> str:
        cores = os.cpu_count() or 1
        return (
            f"{self.label:<34} {self.per_second:8.0f} requests/s  p50 {self.p50_ms:6.1f} ms  "
            f"p99 {self.p99_ms:6.1f} ms  client CPU {self.client_cores:4.2f} cores "
            f"({100 * self.client_cores / cores:3.0f} % of {cores})  statuses {self.statuses}"
        )


def require_wrk() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise SystemExit("this benchmark needs wrk (Debian/Ubuntu: apt-get install wrk)")
    return found


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid Lua string literal for ASCII


def _script(requests: Sequence[Request]) -> str:
    entries = []
    for request in requests:
        headers = ", ".join(
            f"[{_lua_string(name)}] = {_lua_string(value)}"
            for name, value in request.headers.items()
        )
        body = "nil" if request.body is None else _lua_string(request.body)
        entries.append(
            f"  {{{_lua_string(request.method)}, {_lua_string(request.path)}, "
            f"{{{headers}}}, {body}}},"
        )
    # Each wrk thread has its own Lua state: `setup` numbers them so each starts at another
    # point of the list, `done` gathers the per-thread status counts.
    return (
        "local specs = {\n"
        + "\n".join(entries)
        + "\n}\n"
        + """
local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("offset", #threads * 7919)
end
function init(args)
  counts = {}
  prepared = {}
  for k, s in ipairs(specs) do prepared[k] = wrk.format(s[1], s[2], s[3], s[4]) end
  position = offset % #prepared
end
function request()
  position = position % #prepared + 1
  return prepared[position]
end
function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end
function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("counts")) do total[status] = (total[status] or 0) + n end
  end
  local parts = {}
  for status, n in pairs(total) do table.insert(parts, string.format('"%d": %d', status, n)) end
  io.write(string.format(
    'NACHTWACHT-WRK {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, '
      .. '"connect": %d, "read": %d, "write": %d, "timeout": %d, "statuses": {%s}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout,
    table.concat(parts, ", ")))
end
"""
    )


def run_wrk(
    label: str,
    base_url: str,
    requests: Sequence[Request],
    *,
    seconds: float,
    connections: int = 64,
    threads: int = 2,
) -> WrkRun:
    """wrk against `base_url` for `seconds`, replaying `requests` round-robin."""
    wrk = require_wrk()
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_script(requests))
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        finished = subprocess.run(
            [
                wrk,
                f"--threads={threads}",
                f"--connections={connections}",
                f"--duration={max(1, round(seconds))}s",
                "--timeout=10s",
                f"--script={script.name}",
                base_url,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        Path(script.name).unlink(missing_ok=True)
    marker = next(
        (line for line in finished.stdout.splitlines() if line.startswith("NACHTWACHT-WRK ")),
        None,
    )
    if marker is None:
        raise RuntimeError(f"{label}: wrk printed no summary:\n{finished.stdout}{finished.stderr}")
    summary = json.loads(marker.removeprefix("NACHTWACHT-WRK "))
    return WrkRun(
        label=label,
        requests=summary["requests"],
        seconds=summary["duration_us"] / 1e6,
        statuses={int(status): n for status, n in summary["statuses"].items()},
        socket_errors={
            kind: summary[kind] for kind in ("connect", "read", "write", "timeout") if summary[kind]
        },
        p50_ms=summary["p50_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        client_cpu_seconds=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    )
