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
- a burst's time is read inside wrk, on its monotonic clock (through LuaJIT's ffi): from the
  first request sent to the last answer. wrk's launch, the script's loading and the formatting of
  every request in `init` come before it: client work, and more of it for a claim (its
  credential and body) than for a `/healthz`, which the wall time from the launch counted as the
  server's (~11 ms for 4,000 claims beside 4,000 `/healthz`, measured against one bare app).
  (wrk's own `summary.duration` is not it: wrk reads its start after it has started its threads,
  which may have sent requests and had answers by then — a one-request burst was once timed
  1.0 ms with its answer 1.9 ms after its request — and its end waits for the bench's signal.)

A burst can also be cut in two at a moment read inside wrk (its monotonic clock, through
LuaJIT's ffi): with `fill_status`, the last answer of that status (a herd round's last grant, 201:
until then the round's count is unknown and its claims wait for the grants); without, the first
answer of any status (a bare burst's connections are open and its first request served). What
comes after the cut is the burst's steady part: `rate_after_cut` counts the answers that came
after it, less one per connection (at the cut each connection may have a request in flight, and
a claim that waited for the grants is answered at once when they end: those are not counted),
over the time from the cut to the last answer. So it never counts more than the requests sent
after the cut.

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
    # Inside wrk, from the first request sent to the last answer: the client's set-up before the
    # first request (loading the script, formatting every request) is not in it; a burst that
    # ended at the deadline is timed by the wall clock.
    seconds: float
    wall_seconds: float  # from wrk's launch to its exit
    statuses: Counter[int]
    codes: Counter[str]  # `detail.code` of the answers >= 400
    socket_errors: dict[str, int]
    p50_ms: float  # over every request of the burst (the few fillers included)
    p99_ms: float
    client_cpu_seconds: float
    connections: int
    # The cut (module docstring): from the first request sent to it, the answers after it and the
    # time from it to the last answer; None when it was not seen (no answer of `fill_status`).
    cut_seconds: float | None = None
    answers_after_cut: int = 0
    seconds_after_cut: float | None = None

    @property
    def unanswered(self) -> int:
        return self.requests - self.answered

    @property
    def per_second(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0

    @property
    def rate_after_cut(self) -> float | None:
        """Answers per second after the cut, the requests in flight at it left out; None when
        there was no cut, or too few answers after it to say."""
        counted = self.answers_after_cut - self.connections
        if self.seconds_after_cut is None or self.seconds_after_cut <= 0 or counted <= 0:
            return None
        return counted / self.seconds_after_cut


def _script(requests: Sequence[Request], threads: int, fill_status: int | None = None) -> str:
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
        f"local fill_status = {'nil' if fill_status is None else int(fill_status)}\n"
        "local specs = {\n" + "\n".join(specs) + "\n}\n"
        """
-- The monotonic clock (CLOCK_MONOTONIC, 1 on Linux) through LuaJIT's ffi; -1 without it.
local has_ffi, ffi = pcall(require, "ffi")
local timespec = nil
if has_ffi then
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } nachtwacht_timespec;
    int clock_gettime(int clock_id, nachtwacht_timespec *tp);
  ]]
  timespec = ffi.new("nachtwacht_timespec")
end
local function now_us()
  if timespec == nil then return -1 end
  ffi.C.clock_gettime(1, timespec)
  return tonumber(timespec.tv_sec) * 1000000 + math.floor(tonumber(timespec.tv_nsec) / 1000)
end
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
  first_sent = -1
  first_answer = -1
  last_fill = -1
  answer_times = {}
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
    if sent == 1 then first_sent = now_us() end
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
  local at = now_us()
  answer_times[#answer_times + 1] = at
  if first_answer < 0 then first_answer = at end
  if status == fill_status then last_fill = at end
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
  -- The cut: the last answer of fill_status, or (without one) the first answer of any status.
  local start, cut, last, after = -1, -1, -1, 0
  for _, thread in ipairs(threads) do
    local sent_at, answered_at = thread:get("first_sent"), thread:get("first_answer")
    if sent_at >= 0 and (start < 0 or sent_at < start) then start = sent_at end
    if fill_status == nil then
      if answered_at >= 0 and (cut < 0 or answered_at < cut) then cut = answered_at end
    else
      local filled_at = thread:get("last_fill")
      if filled_at > cut then cut = filled_at end
    end
  end
  for _, thread in ipairs(threads) do
    for _, at in ipairs(thread:get("answer_times")) do
      if cut >= 0 and at > cut then after = after + 1 end
      if at > last then last = at end
    end
  end
  local cut_us, after_us, span_us = -1, -1, -1
  if cut >= 0 and start >= 0 then cut_us, after_us = cut - start, last - cut end
  if start >= 0 and last >= start then span_us = last - start end
  local parts, code_parts = {}, {}
  for status, n in pairs(statuses) do table.insert(parts, string.format('"%d": %d', status, n)) end
  for code, n in pairs(refusals) do table.insert(code_parts, string.format('"%s": %d', code, n)) end
  io.write(string.format("""
        + json.dumps(SUMMARY)
        + """ .. '{"answered": %d, "p50_us": %d, "p99_us": %d, "connect": %d, "read": %d, '
      .. '"write": %d, "timeout": %d, "span_us": %d, "cut_us": %d, "after_cut": %d, '
      .. '"after_cut_us": %d, "statuses": {%s}, "codes": {%s}}\\n',
    answered_total, latency:percentile(50), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout,
    span_us, cut_us, after, after_us,
    table.concat(parts, ", "), table.concat(code_parts, ", ")))
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
    fill_status: int | None = None,
) -> Burst:
    """Send each of `requests` once with wrk; returns when every answer came or at the deadline.
    `fill_status`: the status whose last answer cuts the burst (module docstring)."""
    wrk = require_wrk()
    threads = max(1, min(threads, len(requests)))
    connections = max(threads, connections)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_script(requests, threads, fill_status))
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
        # Launch to exit: the time read inside wrk lies within it, whatever the signal's latency.
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
        seconds=(
            summary["span_us"] / 1e6
            if answered == len(requests) and summary["span_us"] > 0
            else seconds
        ),
        wall_seconds=wall_seconds,
        statuses=Counter({int(status): n for status, n in summary["statuses"].items()}),
        codes=Counter(summary["codes"]),
        socket_errors={
            kind: summary[kind] for kind in ("connect", "read", "write", "timeout") if summary[kind]
        },
        p50_ms=summary["p50_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        client_cpu_seconds=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        connections=connections,
        cut_seconds=summary["cut_us"] / 1e6 if summary["cut_us"] >= 0 else None,
        answers_after_cut=summary["after_cut"],
        seconds_after_cut=summary["after_cut_us"] / 1e6 if summary["after_cut_us"] >= 0 else None,
    )


def machine_cores() -> int:
    return os.cpu_count() or 1
