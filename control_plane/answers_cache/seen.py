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

The host's clock an agent's poll says (its `Date` header, as the offset from the control plane's
clock) is noted like a sighting while it is further off than the agent follows
(`host_clock_off`): `agent_clocks` holds that agent's offset and when it was measured. A clock
that agrees removes the row, written once per worker and agent until it is off again: a fleet
whose clocks agree costs no write after each worker's first poll of each agent. So does a poll
without `Date` (`no_date`: the agent was switched back to a release before contract 6, which does
not say its time): what is kept is the latest word of a poll, and such a poll has none, so an old
disagreement is not shown, nor taken for tonight's miss, for ever. A `Date` sent but unreadable
(or sent twice) says nothing either way and changes nothing.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from uuid import UUID

from control_plane.host_sightings import stamp_hosts
from control_plane.poll_word import NOTHING_SAID, PollWord
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
_STAMP_HOSTS = stamp_hosts("""
SELECT v.agent_id, v.host_id, v.at, v.at
  FROM unnest(%(agents)s::uuid[], %(hosts)s::text[], %(ats)s::timestamptz[])
       AS v(agent_id, host_id, at)
 WHERE EXISTS (SELECT 1 FROM agents a WHERE a.id = v.agent_id)
 ORDER BY v.agent_id, v.host_id
""")


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

# The hosts' clocks: the off ones kept with when they were measured, the agreeing ones removed.
_STORE_CLOCKS_OFF = """
INSERT INTO agent_clocks (agent_id, offset_seconds, measured_at)
SELECT v.id, v.offset_seconds, v.at
  FROM unnest(%(ids)s::uuid[], %(offsets)s::bigint[], %(ats)s::timestamptz[])
       AS v(id, offset_seconds, at)
 WHERE EXISTS (SELECT 1 FROM agents a WHERE a.id = v.id)
 ORDER BY v.id
ON CONFLICT (agent_id) DO UPDATE
   SET offset_seconds = EXCLUDED.offset_seconds, measured_at = EXCLUDED.measured_at
 WHERE agent_clocks.measured_at <= EXCLUDED.measured_at
"""
_REMOVE_CLOCKS_AGREEING = "DELETE FROM agent_clocks WHERE agent_id = ANY(%(ids)s::uuid[])"


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
        # Per agent: its host's offset in seconds while off, None once it agrees (to write) …
        self._clocks: dict[UUID, tuple[int | None, datetime]] = {}
        # … and whether this worker last wrote or read it off.
        self._clock_off_known: dict[UUID, bool] = {}

    def saw(self, agent_id: UUID, now: datetime, word: PollWord = NOTHING_SAID) -> None:
        """A poll answered from memory at `now`, with what it said of its host (`word`), or a
        claim refused `window_closed`, which no statement stamps."""
        held = word.held
        with self._lock:
            if held is not None and self._held_known.get(agent_id) != held:
                self._held_known[agent_id] = held
                self._held[agent_id] = held
            last = self._stamped.get(agent_id)
            due = last is None or now - last >= self._resolution or last > now
            if due:
                self._stamped[agent_id] = now
                self._agents[agent_id] = now
            if word.says_clock:
                off = word.clock_off
                if (off and due) or (not off and self._clock_off_known.get(agent_id) is not False):
                    self._clocks[agent_id] = (word.clock if off else None, now)
                self._clock_off_known[agent_id] = off
            if word.host_id is not None:
                key = (agent_id, word.host_id)
                last_host = self._host_stamped.get(key)
                if last_host is None or now - last_host >= self._host_every or last_host > now:
                    self._host_stamped[key] = now
                    self._hosts[key] = now

    def stamped(self, agent_id: UUID, now: datetime, word: PollWord) -> None:
        """The database read stamped this sighting and what its poll said (`word`) itself:
        nothing to write for a while."""
        with self._lock:
            self._stamped[agent_id] = now
            if word.says_clock:
                self._clock_off_known[agent_id] = word.clock_off
                self._clocks.pop(agent_id, None)
            if word.held is not None:
                self._held_known[agent_id] = word.held
                self._held.pop(agent_id, None)
            if word.host_id is not None:
                self._host_stamped[(agent_id, word.host_id)] = now

    def pending(self) -> int:
        with self._lock:
            return len(self._agents) + len(self._hosts) + len(self._held) + len(self._clocks)

    def write(self, conn: Connection) -> int:
        """Write the noted sightings (autocommit); on an error they are noted again."""
        with self._lock:
            agents, self._agents = self._agents, {}
            hosts, self._hosts = self._hosts, {}
            held, self._held = self._held, {}
            clocks, self._clocks = self._clocks, {}
        if not agents and not hosts and not held and not clocks:
            return 0
        off = {agent_id: seen for agent_id, seen in clocks.items() if seen[0] is not None}
        agreeing = [agent_id for agent_id, (offset, _) in clocks.items() if offset is None]
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
            if off:
                conn.execute(
                    _STORE_CLOCKS_OFF,
                    {
                        "ids": list(off),
                        "offsets": [offset for offset, _ in off.values()],
                        "ats": [at for _, at in off.values()],
                    },
                )
            if agreeing:
                conn.execute(_REMOVE_CLOCKS_AGREEING, {"ids": agreeing})
        except Exception:
            with self._lock:
                for agent_id, at in agents.items():
                    self._agents.setdefault(agent_id, at)
                for key, at in hosts.items():
                    self._hosts.setdefault(key, at)
                for agent_id, version in held.items():
                    self._held.setdefault(agent_id, version)
                for agent_id, seen in clocks.items():
                    self._clocks.setdefault(agent_id, seen)
            raise
        with self._lock:
            # Bounded: an agent not heard from for a while is noted again when it returns.
            if len(self._stamped) > 500_000:
                self._stamped.clear()
                self._host_stamped.clear()
            if len(self._held_known) > 500_000:
                self._held_known.clear()
            if len(self._clock_off_known) > 500_000:
                self._clock_off_known.clear()
        return len(agents) + len(hosts) + len(held) + len(clocks)
