"""The hosts that answer for an agent's identity (`agent_hosts`): the one statement that notes a
host's sighting. Three places see a host: a credential checked (`accounts.services`), a config
poll (`agent_config.services`) and the polls answered from memory (`answers_cache.seen`); each
chooses which sightings are due and hands them here.

A host seen before keeps its first sighting, and its last only moves forward: a sighting written
late (from memory, by another replica) or stamped on a clock put back never moves it back."""

from __future__ import annotations

__all__ = ["stamp_hosts"]


def stamp_hosts(sightings: str) -> str:
    """The statement that notes `sightings`: SQL (`VALUES …` or `SELECT …`) yielding rows of
    (agent_id, host_id, first_seen_at, last_seen_at), each sighting's time in the last two."""
    return (
        "INSERT INTO agent_hosts (agent_id, host_id, first_seen_at, last_seen_at)\n"
        f"{sightings.strip()}\n"
        "ON CONFLICT (agent_id, host_id)\n"
        "DO UPDATE SET last_seen_at = greatest(agent_hosts.last_seen_at, EXCLUDED.last_seen_at)"
    )
