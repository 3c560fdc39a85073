"""Requests this process answered 503 `database_unavailable`, by cause, counted in memory (the
database is what is missing) and shown by `/metrics` whenever a scrape gets through: a replica
whose requests wait for a connection in vain now and then still answers most scrapes, and nothing
else says how many agents it turned away.

- `pool_wait`: no connection of the requests' pool was free within `--pool-wait-seconds` (the
  pool is too small for the load, or the database refuses new sessions: see the start-up line
  on the sessions a replica may open, `control_plane.connection_budget`).
- `cancelled`: the database cancelled the request's statement (a lock held by hand, a runaway
  statement: the request connections' lock and statement timeouts).
- `connection`: any other failure to reach or keep the database (it is down, failing over, or
  ended the session).
"""

from __future__ import annotations

import threading

__all__ = ["UNAVAILABLE_CAUSES", "UnavailableAnswers"]

UNAVAILABLE_CAUSES = ("pool_wait", "cancelled", "connection")


class UnavailableAnswers:
    """This process's count of 503 `database_unavailable` answers per cause, from 0 each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(UNAVAILABLE_CAUSES, 0)

    def count(self, cause: str) -> None:
        with self._lock:
            self._counts[cause] += 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
