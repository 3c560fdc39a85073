"""The sightings of answers given from memory, written in batches.

The poll read from the database stamps the agent's sighting in its own statement
(`agent_config.services`). Answered from memory it writes nothing itself: the sighting is noted
here (at most once per `LAST_SEEN_RESOLUTION` per agent and `HOST_SEEN_EVERY` per host, as the
statement does) and the feed's thread writes the batch with its next read, a fraction of a second
later, with the statement's own rule: `last_seen_at`; a sighting more than the stretch gap after
the previous one starts a new stretch (`online_since`) and keeps where the previous one ended
(`previous_seen_at`), so the worker can tell an agent that was offline through a window from
one that was there.

The trust root an agent says it holds (its poll's header) is noted the same way, and written
only when it differs from what this worker last wrote or read for that agent: a fleet that
keeps its root costs no write.
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


# Only the agents whose reported root differs from the stored one: a worker that has not seen
# an agent before notes its first report even when nothing changed.
_STORE_HELD = """
WITH due AS (
  SELECT a.id, v.version
    FROM unnest(%(ids)s::uuid[], %(versions)s::integer[]) AS v(id, version)
    JOIN agents a ON a.id = v.id
   WHERE a.trust_root_version IS DISTINCT FROM v.version
   ORDER BY a.id
     FOR UPDATE OF a
)
UPDATE agents a SET trust_root_version = due.version FROM due WHERE a.id = due.id
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
        self._held: dict[UUID, int] = {}  # to write
        self._held_known: dict[UUID, int] = {}  # written or read, per agent

    def saw(
        self, agent_id: UUID, host_id: str | None, now: datetime, *, held: int | None = None
    ) -> None:
        """A poll answered from memory at `now` (or a claim refused `window_closed`, which no
        statement stamps); `held`: the trust root version it reported."""
        with self._lock:
            if held is not None and self._held_known.get(agent_id) != held:
                self._held_known[agent_id] = held
                self._held[agent_id] = held
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

    def stamped(
        self, agent_id: UUID, host_id: str | None, now: datetime, *, held: int | None = None
    ) -> None:
        """The database read stamped this sighting (and the root it reported, `held`) itself:
        nothing to write for a while."""
        with self._lock:
            self._stamped[agent_id] = now
            if held is not None:
                self._held_known[agent_id] = held
                self._held.pop(agent_id, None)
            if host_id is not None:
                self._host_stamped[(agent_id, host_id)] = now

    def pending(self) -> int:
        with self._lock:
            return len(self._agents) + len(self._hosts) + len(self._held)

    def write(self, conn: Connection) -> int:
        """Write the noted sightings (autocommit); on an error they are noted again."""
        with self._lock:
            agents, self._agents = self._agents, {}
            hosts, self._hosts = self._hosts, {}
            held, self._held = self._held, {}
        if not agents and not hosts and not held:
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
            if held:
                conn.execute(_STORE_HELD, {"ids": list(held), "versions": list(held.values())})
        except Exception:
            with self._lock:
                for agent_id, at in agents.items():
                    self._agents.setdefault(agent_id, at)
                for key, at in hosts.items():
                    self._hosts.setdefault(key, at)
                for agent_id, version in held.items():
                    self._held.setdefault(agent_id, version)
            raise
        with self._lock:
            # Bounded: an agent not heard from for a while is noted again when it returns.
            if len(self._stamped) > 500_000:
                self._stamped.clear()
                self._host_stamped.clear()
            if len(self._held_known) > 500_000:
                self._held_known.clear()
        return len(agents) + len(hosts) + len(held)
