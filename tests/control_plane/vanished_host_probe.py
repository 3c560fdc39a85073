"""Run in a network namespace of its own (`unshare -n`): a PostgreSQL on that namespace's
loopback, a control plane's pool on it, then the loopback taken down — the database host gone
without a word, no reset sent. Prints one JSON line: how the statement sent afterwards ended
(`error` or `answered`, or `waiting` when it had not ended after `WAIT_SECONDS`) and when."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Any

from control_plane.database import open_pool
from tests.worlds.replicated_postgres import archived_primary

# Far beyond the product's bound, far below the kernel's own (about 15 minutes).
WAIT_SECONDS = 120.0


def _loopback(state: str) -> None:
    subprocess.run(["ip", "link", "set", "lo", state], check=True)


def main() -> None:
    _loopback("up")
    with archived_primary() as servers:
        pool = open_pool(servers.primary.url, min_size=1, max_size=1)
        try:
            with pool.connection() as conn:
                conn.execute("SELECT 1")
            ended: dict[str, Any] = {}

            def ask() -> None:
                try:
                    with pool.connection() as conn:
                        conn.execute("SELECT 1")
                    ended["outcome"] = "answered"
                except Exception as exc:  # what the request would have answered 503 for
                    ended["outcome"] = "error"
                    ended["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"

            _loopback("down")
            started = time.monotonic()
            asking = threading.Thread(target=ask, daemon=True)
            asking.start()
            asking.join(WAIT_SECONDS)
            ended.setdefault("outcome", "waiting")
            ended["seconds"] = round(time.monotonic() - started, 1)
            print(json.dumps(ended), flush=True)
        finally:
            _loopback("up")
            pool.close(timeout=5)


if __name__ == "__main__":
    main()
