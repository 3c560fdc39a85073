"""The agents' two calls of every minute answered from memory, exact within a bound.

Nearly every agent polls its config every minute and, at 03:00, asks for a token the caps
refuse. Both answers change only when something is written: a credential revoked, a schedule
changed, a release published, the brake engaged, a run claimed. So each worker remembers them,
and follows every write through the database's change feed (migration 0011's `answer_changes`,
appended by triggers), read every `POLL_SECONDS`.

    memory.py   AnswerMemory: the remembered rows, their invalidation by scope, and freshness
                (nothing is answered from memory once the last read of the feed is older than
                FRESHNESS_SECONDS: a database that cannot be read is not papered over)
    feed.py     ChangeFeed: the thread that reads the feed (its own connection), forgets what
                changed, prunes old rows and writes the remembered sightings
    seen.py     SeenRecorder: `last_seen_at` and the hosts of answers given from memory, written
                in batches by the feed's thread

The bound (docs/control_plane.md, "Hot path"): a change committed more than
`FRESHNESS_SECONDS` before a request is honoured by that request, on every worker and replica.
"""

from control_plane.answers_cache.memory import (
    FRESHNESS_SECONDS,
    POLL_SECONDS,
    AnswerMemory,
    Changes,
)
from control_plane.answers_cache.seen import SeenRecorder

__all__ = [
    "FRESHNESS_SECONDS",
    "POLL_SECONDS",
    "AnswerMemory",
    "Changes",
    "SeenRecorder",
]
