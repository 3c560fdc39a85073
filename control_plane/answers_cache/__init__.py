"""The agents' two calls of every minute answered from memory: what is kept, and how stale.

Nearly every agent polls its config every minute and, at 03:00, asks for a token the caps
refuse. Both answers change only when something is written: a credential revoked, a schedule
changed, a release or a trust root published, the brake engaged, a run recorded. So each
serving worker remembers them (`AnswerMemory`) and follows every write through the database's
change feed: triggers append the writing transaction's id and the scope it touches (an agent,
an organisation, everything) to `answer_changes` (migration 0011), and the worker's feed thread
reads it every `POLL_SECONDS`.

What is kept, per worker:

- the config answer under (credential hash, channel, platform), and a claim's facts
  (`claims.decision.ClaimFacts`) under (credential hash, slot key, pair), never with a run for the
  slot (a token's validity turns with the clock); an answer that turns with the clock rather
  than with a write (a hold that ends) is kept only until that instant;
- per round, the highest grant count seen per organisation and in total. A round's counter
  only grows, so a count seen at any moment of the round is a lower bound for the rest of it,
  and "this round is full" stays true until the round ends.

The invariants:

1. Only refusals and polls are answered from memory, never a grant: a claim the remembered
   facts do not refuse goes to the database (`claims.decision.refusal_for` decides both).
2. A change of an agent forgets that agent's answers; of an organisation, its agents'; of
   everything, all answers and round counts (the caps are settings).
3. A row read from the database is kept only if no change of its agent, its organisation or
   everything was applied since its read began (`AnswerMemory.stamp` before the read).
4. A feed read applies every change committed before it began: it reads every row written by a
   transaction at or after the previous read's oldest running transaction (`feed`).
5. The memory answers only while its last successful read *began* less than
   `FRESHNESS_SECONDS` ago; a read that fails makes it lapse at once (the request then goes to
   the database, and is a 503 if the database is away too).
6. The replica's own writes: a request that wrote is counted in the replica's `ReplicaWrites`
   (shared by its forked workers) before it is answered, and no worker answers from memory
   until a read of its feed began after that count moved (`hot_answers` counts an unsafe
   request answered with a success, but a claim; the claims count the refusals that record
   the slot consumed). A grant is the exception: its own worker forgets its agent's answers at
   once, the other workers within the bound below. (The claims waiting behind a grant in its
   worker are refused from the counts it left; counted replica-wide, every grant would send
   them all to the database. An agent asks again for a slot it was granted only when the
   answer was lost.)

The staleness bound that follows: a change committed more than `FRESHNESS_SECONDS` before a
request is honoured by that request, on every worker and replica; a change this replica wrote
(but a grant, on its other workers) is honoured by its next answer. Tested in
tests/control_plane/answers_cache/.

    memory.py      AnswerMemory: the kept answers and round counts, their forgetting, freshness
    feed.py        ChangeFeed: the thread that reads the feed (its own connection), forgets what
                   changed, prunes old rows and writes the sightings of answers from memory
    own_writes.py  ReplicaWrites: the replica's count of writes, shared by its workers
    seen.py        SeenRecorder: the sightings of polls answered from memory, in batches
    in_flight.py   GrantsInFlight: a claim the memory cannot refuse waits while the grants in
                   flight in its worker fill the room it knows of
    hot_answers.py HotAnswers: the middleware that answers the two calls from memory before
                   FastAPI routes them; the answers are the application's (`FromMemory`, the
                   API's is `api.hot_calls`), so this package imports no service or route
    warm_up.py     SlotWarmUp: a slot's claim facts for every agent due, remembered at once
                   when the herd's first claim of a slot reaches the database (what the facts
                   are is `claims.due_facts`, handed in)

The arrows run one way: the services (`claims`, `agent_config`) and the API import this
package; it imports neither.
"""

from control_plane.answers_cache.memory import (
    FRESHNESS_SECONDS,
    POLL_SECONDS,
    AnswerMemory,
    Changes,
)
from control_plane.answers_cache.own_writes import ReplicaWrites
from control_plane.answers_cache.seen import SeenRecorder

__all__ = [
    "FRESHNESS_SECONDS",
    "POLL_SECONDS",
    "AnswerMemory",
    "Changes",
    "ReplicaWrites",
    "SeenRecorder",
]
