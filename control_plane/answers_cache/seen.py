"""The sightings of answers given from memory, written in batches.

The poll read from the database stamps the agent's sighting in its own statement
(`agent_config.services`). Answered from memory it writes nothing itself: the sighting is noted
here (at most once per `LAST_SEEN_RESOLUTION` per agent and `HOST_SEEN_EVERY` per host, as the
statement does) and the feed's thread writes the batch with its next read, a fraction of a second
later, with the statement's own rule: `last_seen_at`; a sighting more than the stretch gap after
the previous one starts a new stretch (`online_since`) and keeps where the previous one ended
(`previous_seen_at`), so the worker can tell an agent that was offline through a window from
one that was there.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from uuid import UUID

from control_plane.types import Connection

__all__ = ["SeenRecorder"]

# Every worker of every replica writes its own batch, and at a fleet's pace their batches name
# the same agents (an agent's polls reach every worker). Rows are locked in one order — the
# agents by id, the hosts by (agent, host) — so two batches never wait for each other in a
# circle: in the order each worker had noted them, two workers deadlocked, and each waited a
# second (`deadlock_timeout`) before one of them failed.
_STAMP_AGENTS = """
WITH due AS (
  SELECT a.id, v.at
    FROM unnest(%(ids)s::uuid[], %(ats)s::timestamptz[]) AS v(id, at)
    JOIN agents a ON a.id = v.id
   WHERE a.last_seen_at IS NULL OR a.last_seen_at <= v.at - %(resolution)s::interval
      OR a.last_seen_at > v.at
   ORDER BY a.id
     FOR UPDATE OF a
)
UPDATE agents a
   SET last_seen_at = due.at,
       online_since = CASE WHEN a.last_seen_at IS NULL
                                OR a.last_seen_at < due.at - %(stretch_gap)s::interval
                                OR a.last_seen_at > due.at OR a.online_since IS NULL
                           THEN due.at ELSE a.online_since END,
       previous_seen_at = CASE WHEN a.last_seen_at < due.at - %(stretch_gap)s::interval
                               THEN a.last_seen_at ELSE a.previous_seen_at END
  FROM due WHERE a.id = due.id
"""
_STAMP_HOSTS = """
INSERT INTO agent_hosts (agent_id, host_id, first_seen_at, last_seen_at)
SELECT v.agent_id, v.host_id, v.at, v.at
  FROM unnest(%(agents)s::uuid[], %(hosts)s::text[], %(ats)s::timestamptz[])
       AS v(agent_id, host_id, at)
 WHERE EXISTS (SELECT 1 FROM agents a WHERE a.id = v.agent_id)
 ORDER BY v.agent_id, v.host_id
ON CONFLICT (agent_id, host_id)
DO UPDATE SET last_seen_at = greatest(agent_hosts.last_seen_at, EXCLUDED.last_seen_at)
"""


class SeenRecorder:
    """`saw` is a few dictionary operations under a lock; `write` sends the batch."""

    def __init__(
        self, *, resolution: timedelta, host_every: timedelta, stretch_gap: timedelta
    ) -> None:
        self._resolution = resolution
        self._stretch_gap = stretch_gap
        self._host_every = host_every
        self._lock = threading.Lock()
        self._agents: dict[UUID, datetime] = {}
        self._hosts: dict[tuple[UUID, str], datetime] = {}
        self._stamped: dict[UUID, datetime] = {}
        self._host_stamped: dict[tuple[UUID, str], datetime] = {}

    def saw(self, agent_id: UUID, host_id: str | None, now: datetime) -> None:
        with self._lock:
            last = self._stamped.get(agent_id)
            if last is None or now - last >= self._resolution or last > now:
                self._stamped[agent_id] = now
                self._agents[agent_id] = now
            if host_id is not None:
                key = (agent_id, host_id)
                last_host = self._host_stamped.get(key)
                if last_host is None or now - last_host >= self._host_every or last_host > now:
                    self._host_stamped[key] = now
                    self._hosts[key] = now

    def stamped(self, agent_id: UUID, host_id: str | None, now: datetime) -> None:
        """The database read stamped this sighting itself: nothing to write for a while."""
        with self._lock:
            self._stamped[agent_id] = now
            if host_id is not None:
                self._host_stamped[(agent_id, host_id)] = now

    def pending(self) -> int:
        with self._lock:
            return len(self._agents) + len(self._hosts)

    def write(self, conn: Connection) -> int:
        """Write the noted sightings (autocommit); on an error they are noted again."""
        with self._lock:
            agents, self._agents = self._agents, {}
            hosts, self._hosts = self._hosts, {}
        if not agents and not hosts:
            return 0
        try:
            if agents:
                conn.execute(
                    _STAMP_AGENTS,
                    {
                        "ids": list(agents),
                        "ats": list(agents.values()),
                        "resolution": self._resolution,
                        "stretch_gap": self._stretch_gap,
                    },
                )
            if hosts:
                conn.execute(
                    _STAMP_HOSTS,
                    {
                        "agents": [key[0] for key in hosts],
                        "hosts": [key[1] for key in hosts],
                        "ats": list(hosts.values()),
                    },
                )
        except Exception:
            with self._lock:
                for agent_id, at in agents.items():
                    self._agents.setdefault(agent_id, at)
                for key, at in hosts.items():
                    self._hosts.setdefault(key, at)
            raise
        with self._lock:
            # Bounded: an agent not heard from for a while is noted again when it returns.
            if len(self._stamped) > 500_000:
                self._stamped.clear()
                self._host_stamped.clear()
        return len(agents) + len(hosts)
