"""What `agent_daemon.lean_imports` leaves out of the daemon, and that what it defers still works
the moment something uses it (issue 16, footprint). Each case runs in a fresh interpreter: which
modules a process has imported is the thing under test."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.worlds.processes import REPO_ROOT, child_environment

DEFERRED = ("asyncio", "concurrent.futures.process", "multiprocessing", "tzlocal")


def run_fresh(code: str) -> dict[str, object]:
    """Run `code` in a new interpreter; it prints one JSON object as its last line."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=child_environment(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def test_the_daemon_loop_imports_apscheduler_without_asyncio_process_pools_or_tzlocal() -> None:
    found = run_fresh(
        f"""
        import json, sys
        import agent_daemon.daemon_loop
        print(json.dumps({{name: name in sys.modules for name in {DEFERRED!r}}}))
        """
    )
    assert found == dict.fromkeys(DEFERRED, False)


def test_a_later_import_gets_the_real_modules() -> None:
    found = run_fresh(
        """
        import json
        import agent_daemon.daemon_loop
        import asyncio, multiprocessing, tzlocal
        from concurrent.futures.process import BrokenProcessPool
        print(json.dumps({
            "asyncio": hasattr(asyncio, "run") and asyncio.__spec__ is not None,
            "multiprocessing": multiprocessing.__spec__ is not None,
            "tzlocal": tzlocal.__spec__ is not None,
            "process": BrokenProcessPool.__module__,
        }))
        """
    )
    assert found == {
        "asyncio": True,
        "multiprocessing": True,
        "tzlocal": True,
        "process": "concurrent.futures.process",
    }


def test_apscheduler_still_tells_a_coroutine_function_from_a_plain_one() -> None:
    # Its asyncio executor's check, through the deferred `iscoroutinefunction`.
    found = run_fresh(
        """
        import functools, json, sys
        import agent_daemon.daemon_loop
        from apscheduler.util import iscoroutinefunction_partial

        async def coroutine() -> None: ...

        print(json.dumps({
            "coroutine": iscoroutinefunction_partial(functools.partial(coroutine)),
            "plain": iscoroutinefunction_partial(print),
            "asyncio_loaded_on_use": "asyncio" in sys.modules,
        }))
        """
    )
    assert found == {"coroutine": True, "plain": False, "asyncio_loaded_on_use": True}


def test_a_stand_in_hands_every_other_name_to_the_real_module() -> None:
    # apscheduler's process-pool executor reads `multiprocessing.get_context` when it is built.
    found = run_fresh(
        """
        import json, sys
        import agent_daemon.daemon_loop
        from apscheduler.executors import pool
        context = pool.multiprocessing.get_context("spawn")
        print(json.dumps({
            "context": type(context).__name__,
            "real_module_imported": sys.modules["multiprocessing"] is not pool.multiprocessing,
        }))
        """
    )
    assert found == {"context": "SpawnContext", "real_module_imported": True}


def test_a_module_already_imported_is_left_alone() -> None:
    found = run_fresh(
        """
        import asyncio, json, sys
        from agent_daemon.lean_imports import apscheduler_without_unused_imports
        with apscheduler_without_unused_imports():
            from apscheduler.util import iscoroutinefunction
            inside = sys.modules["asyncio"] is asyncio
        print(json.dumps({
            "inside": inside,
            "after": sys.modules["asyncio"] is asyncio,
            "real_function": iscoroutinefunction is asyncio.iscoroutinefunction,
        }))
        """
    )
    assert found == {"inside": True, "after": True, "real_function": True}


def test_a_deferred_name_used_inside_the_block_imports_the_real_module() -> None:
    # Whatever asks while APScheduler is still being imported gets the real answer, not the
    # stand-in again.
    found = run_fresh(
        """
        import json, sys
        from agent_daemon.lean_imports import apscheduler_without_unused_imports

        async def coroutine() -> None: ...

        with apscheduler_without_unused_imports():
            import asyncio as stand_in
            answer = stand_in.iscoroutinefunction(coroutine)
            replaced = sys.modules["asyncio"] is not stand_in
        print(json.dumps({"answer": answer, "replaced": replaced}))
        """
    )
    assert found == {"answer": True, "replaced": True}


def test_httpx_comes_without_idna_for_ascii_hosts() -> None:
    found = run_fresh(
        """
        import json, sys
        import agent_daemon.http_client
        import httpx
        url = httpx.URL("https://Control.Example:8443/v1/agent/config")
        print(json.dumps({"host": url.host, "idna": "idna" in sys.modules}))
        """
    )
    assert found == {"host": "control.example", "idna": False}


def test_a_host_outside_ascii_is_encoded_and_a_bad_one_refused_by_the_real_idna() -> None:
    found = run_fresh(
        """
        import json, sys
        import agent_daemon
        import httpx
        url = httpx.URL("https://bücher.example/")
        try:
            httpx.URL("https://a\\u0080\\u0300b.example/")
            refused = None
        except httpx.InvalidURL as exc:
            refused = str(exc)
        import idna
        print(json.dumps({
            "raw_host": url.raw_host.decode(),
            "host": url.host,
            "refused": refused,
            "real": idna.__spec__ is not None and sys.modules["idna"] is idna,
        }))
        """
    )
    assert found == {
        "raw_host": "xn--bcher-kva.example",
        "host": "bücher.example",
        "refused": "Invalid IDNA hostname: 'a\\x80\u0300b.example'",
        "real": True,
    }


def test_idna_imported_before_the_agent_is_the_one_httpx_uses() -> None:
    found = run_fresh(
        """
        import json, sys
        import idna
        import agent_daemon
        import httpx._urlparse
        print(json.dumps({"same": httpx._urlparse.idna is idna}))
        """
    )
    assert found == {"same": True}


def test_httpx_comes_without_anyio_and_an_async_request_still_works() -> None:
    # The daemon's clients are synchronous; an async one (nothing in the agent makes one) imports
    # the real anyio the moment it needs it, and gets its answer.
    found = run_fresh(
        """
        import asyncio, json, sys, threading
        from http.server import BaseHTTPRequestHandler, HTTPServer
        import agent_daemon.http_client
        import httpx
        httpx.Client().close()  # a transport made, as every agent client makes one
        without = "anyio" not in sys.modules

        class Answer(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        server = HTTPServer(("127.0.0.1", 0), Answer)
        threading.Thread(target=server.serve_forever, daemon=True).start()

        async def fetch():
            async with httpx.AsyncClient() as client:
                answer = await client.get(f"http://127.0.0.1:{server.server_port}/")
                return answer.status_code, answer.text

        status, text = asyncio.run(fetch())
        import anyio
        print(json.dumps({
            "without": without,
            "answer": [status, text],
            "real": anyio.__spec__ is not None and sys.modules["anyio"] is anyio,
        }))
        """
    )
    assert found == {"without": True, "answer": [200, "ok"], "real": True}
