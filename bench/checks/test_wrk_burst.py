"""bench/wrk_burst.py sends each request exactly once, so a herd round is each agent's one claim.

A real wrk against a real HTTP server on loopback that counts what it receives per path: no
request lost (wrk's own check of the script calls `request()` once before the run and never sends
it), none sent twice, every answer counted, and the filler that idle connections send is not.
"""

from __future__ import annotations

import shutil
import threading
import time
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
        self.granted = threading.Event()

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
        if self.path == "/grant":
            # A round's grant: the claims that wait for it are answered just after it.
            time.sleep(0.3)
            self._answer(201, b"{}")
            self.server.granted.set()
            return
        if self.path.startswith("/waits"):
            self.server.granted.wait(10)
            time.sleep(0.02)  # a refusal answered a moment after the grant, as a busy server does
        elif self.path.startswith("/slow"):
            time.sleep(0.05)  # a slow answer is the behaviour under test
        if self.path.endswith("/refused") or self.path.startswith(("/waits", "/slow")):
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
    # Timed inside wrk (first request sent to last answer), within the wall time from its launch
    # (which also holds the script's loading): never longer than it took, nor as nothing.
    assert 0 < burst.seconds <= burst.wall_seconds
    # Without a fill status the cut is the first answer, inside the burst.
    assert burst.cut_seconds is not None
    assert 0 <= burst.cut_seconds <= burst.seconds
    assert burst.answers_after_cut <= count - 1


def test_the_cut_is_the_last_grant_and_the_claims_that_waited_for_it_are_not_counted(
    server: _Counting,
) -> None:
    """A herd round in small: four connections, the first request a grant that takes 0.3 s, the
    next three claims waiting for it (answered all at once when it is), then eight refusals of
    50 ms each. After the cut (the grant's answer) 11 answers come, but only the eight refusals
    were sent after it: counting the three claims that waited would make the server look faster
    than it was, so the rate never counts more than eight answers in that time."""
    requests = [
        Request(method="POST", path="/grant", headers={}, body="{}"),
        *(Request(method="POST", path=f"/waits/{n}", headers={}, body="{}") for n in range(3)),
        *(Request(method="POST", path=f"/slow/{n}", headers={}, body="{}") for n in range(8)),
    ]
    burst = run_burst(
        f"http://127.0.0.1:{server.server_address[1]}",
        requests,
        deadline_seconds=60,
        connections=4,
        threads=1,
        fill_status=201,
    )
    assert burst.answered == len(requests)
    assert burst.statuses == Counter({201: 1, 429: 11})
    assert burst.cut_seconds is not None and burst.cut_seconds >= 0.3
    assert burst.answers_after_cut == 11
    assert burst.seconds_after_cut is not None and burst.seconds_after_cut >= 0.1
    rate = burst.rate_after_cut
    assert rate is not None and 0 < rate * burst.seconds_after_cut <= 8, burst


def test_a_burst_without_its_fill_status_has_no_cut(server: _Counting) -> None:
    burst = run_burst(
        f"http://127.0.0.1:{server.server_address[1]}",
        [
            Request(method="POST", path=f"/claim/{n}/refused", headers={}, body="{}")
            for n in range(20)
        ],
        deadline_seconds=60,
        connections=4,
        fill_status=201,
    )
    assert burst.answered == 20
    assert burst.cut_seconds is None
    assert burst.rate_after_cut is None


def test_a_bursts_time_leaves_out_the_clients_set_up(
    server: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time is read inside wrk, from the first request sent: a script that takes long to
    load (here it sleeps half a second wherever wrk loads it) is client work, not the server's."""
    loaded = wrk_burst._script

    def slow_to_load(requests: list[Request], threads: int, fill_status: int | None) -> str:
        return 'os.execute("sleep 0.5")\n' + loaded(requests, threads, fill_status)

    monkeypatch.setattr(wrk_burst, "_script", slow_to_load)
    burst = run_burst(
        f"http://127.0.0.1:{server.server_address[1]}",
        [Request(method="POST", path="/claim/1", headers={}, body="{}")],
        deadline_seconds=60,
        connections=2,
    )
    assert burst.answered == 1
    assert burst.wall_seconds - burst.seconds >= 0.5, burst
