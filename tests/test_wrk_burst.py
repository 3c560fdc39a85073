"""bench/wrk_burst.py sends each request exactly once, so a herd round is each agent's one claim.

A real wrk against a real HTTP server on loopback that counts what it receives per path: no
request lost (wrk's own check of the script calls `request()` once before the run and never sends
it), none sent twice, every answer counted, and the filler that idle connections send is not.
"""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench import wrk_burst
from bench.wrk_burst import run_burst
from bench.wrk_load import Request

pytestmark = pytest.mark.skipif(
    shutil.which("wrk") is None, reason="needs wrk (apt-get install wrk)"
)


class _Counting(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: Counter[str] = Counter()
        self.lock = threading.Lock()

    def handle_error(self, request: object, client_address: object) -> None:
        """wrk is interrupted with connections open: a reset there is expected, not a failure."""
        del request, client_address


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Counting

    def log_message(self, format: str, *args: object) -> None:
        del format, args

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.received[self.path] += 1
        if self.path.endswith("/refused"):
            self._answer(429, b'{"detail": {"code": "org_cap"}}')
        else:
            self._answer(201, b"{}")

    def do_DELETE(self) -> None:  # the filler
        with self.server.lock:
            self.server.received["filler"] += 1
        self._answer(405, b"{}")


@pytest.fixture
def server() -> Iterator[_Counting]:
    counting = _Counting()
    thread = threading.Thread(target=counting.serve_forever, daemon=True)
    thread.start()
    try:
        yield counting
    finally:
        counting.shutdown()
        counting.server_close()


@pytest.mark.parametrize("count", [1, 2, 7, 200])
def test_each_request_is_sent_once_and_answered(server: _Counting, count: int) -> None:
    paths = [f"/claim/{n}" + ("/refused" if n % 3 == 0 else "") for n in range(count)]
    requests = [
        Request(method="POST", path=path, headers={"Authorization": f"Bearer {n}"}, body="{}")
        for n, path in enumerate(paths)
    ]
    burst = run_burst(
        f"http://127.0.0.1:{server.server_address[1]}",
        requests,
        deadline_seconds=60,
        connections=8,
    )
    assert {path: server.received[path] for path in paths} == {path: 1 for path in paths}
    assert burst.answered == count
    assert burst.unanswered == 0
    refused = sum(path.endswith("/refused") for path in paths)
    assert burst.statuses == Counter({201: count - refused, 429: refused}) - Counter()
    assert burst.codes == Counter({"org_cap": refused}) - Counter()
    # wrk's own clock, inside the wall time from its launch (which also holds the script's
    # loading): a burst is never timed longer than it took, nor as nothing.
    assert 0 < burst.seconds <= burst.wall_seconds


def test_a_bursts_time_leaves_out_the_clients_set_up(
    server: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time is wrk's own, from its threads' start: a script that takes long to load (here it
    sleeps half a second wherever wrk loads it) is client work, not the server's."""
    loaded = wrk_burst._script

    def slow_to_load(requests: list[Request], threads: int) -> str:
        return 'os.execute("sleep 0.5")\n' + loaded(requests, threads)

    monkeypatch.setattr(wrk_burst, "_script", slow_to_load)
    burst = run_burst(
        f"http://127.0.0.1:{server.server_address[1]}",
        [Request(method="POST", path="/claim/1", headers={}, body="{}")],
        deadline_seconds=60,
        connections=2,
    )
    assert burst.answered == 1
    assert burst.wall_seconds - burst.seconds >= 0.5, burst
