"""One burst with `wrk`: every prepared request sent exactly once, then wrk is stopped.

`bench/wrk_load.py` replays requests round-robin for a fixed time (a steady rate). A herd round is
not that: each agent still waiting claims once, and the round is over when every claim has its
answer. wrk has no "N requests" option, so the Lua script here does it:

- thread i of T takes the requests i, i+T, i+2T, … and sends each once; a connection that asks
  for more after its thread's share is gone waits a second (wrk's `delay`) and then gets a
  `DELETE /healthz` (the filler: its answer, 405, is not counted; the benchmarks' requests are
  never answered 405), so no claim is sent twice;
- wrk calls the first thread's `request()` once before it starts, to check the script, and
  never sends that request: the script gives it the filler;
- when a thread has an answer to each of its requests it prints a line and stops itself
  (`wrk.thread:stop()`); once every thread has, `run_burst` interrupts wrk (SIGINT: wrk then
  prints its summary as at the end of `--duration`), so a burst lasts as long as its answers take;
- the answers are counted by status and, for a refusal, by its `detail.code`, inside wrk;
- wrk's own CPU time (its rusage as a reaped child) is returned beside the burst's wall time;
- a burst's time is wrk's own (`summary.duration`: from its threads' start to its stop, which
  follows the last answer by the bench's reaction to the threads' lines, as for every burst).
  wrk's launch, the script's loading and the formatting of every request in `init` come before
  it: client work, and more of it for a claim (its credential and body) than for a `/healthz`,
  which the wall time from the launch counted as the server's (~11 ms for 4,000 claims beside
  4,000 `/healthz`, measured against one bare app).

A burst whose answers do not all come (a dropped connection) ends at `deadline_seconds`; the
requests without an answer are reported as `unanswered`.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.wrk_load import Request, require_wrk

__all__ = ["Burst", "run_burst"]

THREAD_DONE = "NACHTWACHT-BURST-THREAD-DONE"
SUMMARY = "NACHTWACHT-BURST "


@dataclass(frozen=True, kw_only=True)
class Burst:
    requests: int
    answered: int
    # wrk's own clock, from its threads' start to its stop after the last answer: the client's
    # set-up before the first request (loading the script, formatting every request) is not in
    # it; a burst that ended at the deadline is timed by the wall clock.
    seconds: float
    wall_seconds: float  # from wrk's launch to its exit
    statuses: Counter[int]
    codes: Counter[str]  # `detail.code` of the answers >= 400
    socket_errors: dict[str, int]
    p50_ms: float  # over every request of the burst (the few fillers included)
    p99_ms: float
    client_cpu_seconds: float

    @property
    def unanswered(self) -> int:
        return self.requests - self.answered

    @property
    def per_second(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0


def _script(requests: Sequence[Request], threads: int) -> str:
    specs = []
    for request in requests:
        headers = ", ".join(
            f"[{json.dumps(name)}] = {json.dumps(value)}" for name, value in request.headers.items()
        )
        body = "nil" if request.body is None else json.dumps(request.body)
        method, path = json.dumps(request.method), json.dumps(request.path)
        specs.append(f"  {{{method}, {path}, {{{headers}}}, {body}}},")
    return (
        f"local thread_count = {threads}\n"
        "local specs = {\n" + "\n".join(specs) + "\n}\n"
        """
local threads = {}
function setup(thread)
  thread:set("index", #threads)
  table.insert(threads, thread)
end
function init(args)
  counts = {}
  codes = {}
  answered = 0
  prepared = {}
  for k = index + 1, #specs, thread_count do
    local s = specs[k]
    prepared[#prepared + 1] = wrk.format(s[1], s[2], s[3], s[4])
  end
  sent = 0
  filler = wrk.format("DELETE", "/healthz")
  finished = false
  -- wrk calls the first thread's request() once before the run, to check the script, and
  -- throws the answer away: that call gets the filler, so no claim is lost to it.
  checking = index == 0
end
function request()
  if checking then
    checking = false
    return filler
  end
  if sent < #prepared then
    sent = sent + 1
    return prepared[sent]
  end
  if not finished and #prepared == 0 then
    finished = true
    io.write("""
        + json.dumps(THREAD_DONE + "\n")
        + """)
    io.flush()
  end
  return filler
end
function delay()
  -- A connection whose thread has sent its share waits instead of hammering the filler.
  if sent >= #prepared then return 1000 end
  return 0
end
function response(status, headers, body)
  if status == 405 then return end
  counts[status] = (counts[status] or 0) + 1
  if status >= 400 then
    local code = string.match(body, '"code"%s*:%s*"([^"]+)"') or "none"
    codes[code] = (codes[code] or 0) + 1
  end
  answered = answered + 1
  if answered == #prepared and not finished then
    finished = true
    io.write("""
        + json.dumps(THREAD_DONE + "\n")
        + """)
    io.flush()
    wrk.thread:stop()
  end
end
function done(summary, latency, requests)
  local statuses, refusals = {}, {}
  local answered_total = 0
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("counts")) do
      statuses[status] = (statuses[status] or 0) + n
      answered_total = answered_total + n
    end
    for code, n in pairs(thread:get("codes")) do refusals[code] = (refusals[code] or 0) + n end
  end
  local parts, code_parts = {}, {}
  for status, n in pairs(statuses) do table.insert(parts, string.format('"%d": %d', status, n)) end
  for code, n in pairs(refusals) do table.insert(code_parts, string.format('"%s": %d', code, n)) end
  io.write(string.format("""
        + json.dumps(SUMMARY)
        + """ .. '{"answered": %d, "p50_us": %d, "p99_us": %d, "connect": %d, "read": %d, '
      .. '"write": %d, "timeout": %d, "duration_us": %d, "statuses": {%s}, "codes": {%s}}\\n',
    answered_total, latency:percentile(50), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout,
    summary.duration, table.concat(parts, ", "), table.concat(code_parts, ", ")))
  io.flush()
end
"""
    )


def _stopped(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """SIGINT until wrk ends and prints its summary. wrk ignores SIGINT until its threads are
    started, and a small burst can be answered before that: one SIGINT then is lost and wrk ran
    on for its whole duration. Killed, with a clear error, if it never stops."""
    deadline = time.monotonic() + 30
    while True:
        process.send_signal(signal.SIGINT)
        try:
            return process.communicate(timeout=1)
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                process.kill()
                process.communicate()
                raise RuntimeError("wrk did not stop within 30 s of SIGINT") from None


def run_burst(
    base_url: str,
    requests: Sequence[Request],
    *,
    deadline_seconds: float,
    connections: int = 64,
    threads: int = 2,
) -> Burst:
    """Send each of `requests` once with wrk; returns when every answer came or at the deadline."""
    wrk = require_wrk()
    threads = max(1, min(threads, len(requests)))
    connections = max(threads, connections)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_script(requests, threads))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        process = subprocess.Popen(
            [
                wrk,
                f"--threads={threads}",
                f"--connections={connections}",
                # Longer than the deadline: the burst is ended by its answers or by the deadline.
                f"--duration={int(deadline_seconds) + 60}s",
                "--timeout=10s",
                f"--script={script.name}",
                base_url,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None
        # Raw reads, not readline: a buffered reader could hold a line that select() no longer
        # announces (wrk prints its banner and the threads' lines in one write or in several).
        stdout = process.stdout.fileno()
        received = b""
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while received.count(THREAD_DONE.encode()) < threads:
                left = deadline_seconds - (time.perf_counter() - started)
                if left <= 0 or not selector.select(timeout=left):
                    break
                chunk = os.read(stdout, 65536)
                if not chunk:
                    break
                received += chunk
        seconds = time.perf_counter() - started
        rest, errors = _stopped(process)
        # Launch to exit: wrk's own clock runs inside it, whatever the signal's latency.
        wall_seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        Path(script.name).unlink(missing_ok=True)
    output = (received + rest).decode(errors="replace")
    marker = next((line for line in output.splitlines() if line.startswith(SUMMARY)), None)
    if marker is None:
        raise RuntimeError(f"wrk printed no summary:\n{output}{errors.decode(errors='replace')}")
    summary = json.loads(marker.removeprefix(SUMMARY))
    answered = summary["answered"]
    return Burst(
        requests=len(requests),
        answered=answered,
        seconds=summary["duration_us"] / 1e6 if answered == len(requests) else seconds,
        wall_seconds=wall_seconds,
        statuses=Counter({int(status): n for status, n in summary["statuses"].items()}),
        codes=Counter(summary["codes"]),
        socket_errors={
            kind: summary[kind] for kind in ("connect", "read", "write", "timeout") if summary[kind]
        },
        p50_ms=summary["p50_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        client_cpu_seconds=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    )


def machine_cores() -> int:
    return os.cpu_count() or 1
