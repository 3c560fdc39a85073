"""AnswerMemory on its own: freshness, stamps, what a change forgets, the round counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from control_plane.answers_cache import FRESHNESS_SECONDS, AnswerMemory, Changes
from tests.control_plane.answers_cache.conftest import Ticks

ROUND = datetime(2026, 11, 30, 2, 1, tzinfo=UTC)
AGENT, OTHER, ORG = uuid4(), uuid4(), uuid4()


def _live(ticks: Ticks) -> AnswerMemory:
    memory = AnswerMemory(monotonic=ticks)
    memory.apply(Changes(), read_started=ticks.now)
    return memory


def _remember(
    memory: AnswerMemory, key: str, agent: UUID = AGENT, until: datetime | None = None
) -> bool:
    return memory.remember(
        key, f"{key}-answer", agent_id=agent, org_id=ORG, stamp=memory.stamp(), until=until
    )


def test_a_memory_never_fed_answers_nothing() -> None:
    memory = AnswerMemory()
    assert memory.stamp() is None
    assert not memory.remember("k", "v", agent_id=AGENT, org_id=ORG, stamp=0)
    assert memory.recall("k") is None


def test_an_answer_is_not_given_once_the_last_read_is_older_than_the_bound() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    assert _remember(memory, "a")
    ticks.now += FRESHNESS_SECONDS - 0.01
    assert memory.recall("a") == "a-answer"
    ticks.now += 0.01
    assert memory.recall("a") is None
    assert memory.granted_in_round(ROUND, ORG) == (0, 0)


def test_a_row_read_before_a_change_of_its_agent_is_not_remembered() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    stamp = memory.stamp()  # a reader starts its database read ...
    memory.apply(Changes(agents=frozenset({AGENT})), read_started=ticks.now)  # ... a change lands
    assert not memory.remember("a", "stale", agent_id=AGENT, org_id=ORG, stamp=stamp)
    assert memory.recall("a") is None


def test_a_row_read_before_a_change_of_its_organisation_is_not_remembered() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    stamp = memory.stamp()
    memory.apply(Changes(orgs=frozenset({ORG})), read_started=ticks.now)
    assert not memory.remember("a", "stale", agent_id=AGENT, org_id=ORG, stamp=stamp)


def test_a_row_read_before_a_change_of_everything_is_not_remembered() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    stamp = memory.stamp()
    memory.apply(Changes(everything=True), read_started=ticks.now)
    assert not memory.remember("a", "stale", agent_id=AGENT, org_id=ORG, stamp=stamp)
    assert memory.remember_many([("b", "stale", AGENT, ORG)], stamp=stamp) == 0


def test_a_change_of_another_agent_does_not_spoil_a_read_in_flight() -> None:
    # At 03:00 every grant is a change: a burst's reads must not all be thrown away for them.
    ticks = Ticks()
    memory = _live(ticks)
    stamp = memory.stamp()
    memory.apply(Changes(agents=frozenset({OTHER})), read_started=ticks.now)
    assert memory.remember("a", "fresh", agent_id=AGENT, org_id=ORG, stamp=stamp)
    assert memory.recall("a") == "fresh"


def test_a_read_older_than_the_bounded_change_list_is_spoilt() -> None:
    ticks = Ticks()
    memory = AnswerMemory(monotonic=ticks, max_entries=2)
    memory.apply(Changes(), read_started=ticks.now)
    stamp = memory.stamp()
    # More changed subjects than the memory keeps track of: every read in flight is spoilt,
    # even one of an agent the list no longer names.
    memory.apply(Changes(agents=frozenset({uuid4(), uuid4(), uuid4()})), read_started=ticks.now)
    assert not memory.remember("a", "stale", agent_id=AGENT, org_id=ORG, stamp=stamp)


def test_a_warm_up_keeps_only_the_rows_no_change_spoilt() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    stamp = memory.stamp()
    memory.apply(Changes(agents=frozenset({OTHER})), read_started=ticks.now)
    rows = [("mine", "m", AGENT, ORG), ("other", "o", OTHER, ORG)]
    assert memory.remember_many(rows, stamp=stamp) == 1
    assert memory.recall("mine") == "m"
    assert memory.recall("other") is None


def test_a_warm_up_never_pushes_out_what_requests_read() -> None:
    ticks = Ticks()
    memory = AnswerMemory(monotonic=ticks, max_entries=2)
    memory.apply(Changes(), read_started=ticks.now)
    _remember(memory, "read")
    rows = [(key, key, uuid4(), ORG) for key in ("w1", "w2", "w3")]
    assert memory.remember_many(rows, stamp=memory.stamp()) == 1
    assert memory.recall("read") == "read-answer"


def test_a_change_of_one_agent_forgets_only_its_answers() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    _remember(memory, "mine")
    _remember(memory, "other", OTHER)
    memory.note_granted(ROUND, ORG, 5)
    memory.apply(Changes(agents=frozenset({AGENT})), read_started=ticks.now)
    assert memory.recall("mine") is None
    assert memory.recall("other") == "other-answer"
    assert memory.granted_in_round(ROUND, ORG)[0] == 5  # a round's count only grows: kept


def test_a_change_of_an_organisation_forgets_its_agents_answers() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    _remember(memory, "mine")
    memory.apply(Changes(orgs=frozenset({ORG})), read_started=ticks.now)
    assert memory.recall("mine") is None


def test_a_change_of_everything_forgets_the_round_counts_too() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    _remember(memory, "mine")
    memory.note_granted(ROUND, ORG, 5)
    memory.apply(Changes(everything=True), read_started=ticks.now)
    assert memory.recall("mine") is None
    assert memory.granted_in_round(ROUND, ORG) == (
        0,
        0,
    )  # the caps are settings: a full round may not be


def test_a_gap_between_reads_longer_than_the_bound_forgets_everything() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    _remember(memory, "mine")
    ticks.now += FRESHNESS_SECONDS  # the feed's thread was held up; rows may have been pruned
    memory.apply(Changes(), read_started=ticks.now)
    assert memory.recall("mine") is None


def test_a_round_count_is_kept_as_its_highest() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    memory.note_granted(ROUND, ORG, 5)
    memory.note_granted(ROUND, ORG, 3)  # a read that began earlier
    assert memory.granted_in_round(ROUND, ORG)[0] == 5
    assert memory.granted_in_round(ROUND + timedelta(minutes=1), ORG) == (0, 0)


def test_an_answer_remembered_until_an_instant_is_not_given_from_it_on() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    hold_ends = ROUND + timedelta(hours=1)
    _remember(memory, "held", until=hold_ends)
    assert memory.recall("held", now=hold_ends - timedelta(seconds=1)) == "held-answer"
    assert memory.recall("held", now=hold_ends) is None
    assert memory.recall("held") is None  # without the request's instant: not given


def test_a_full_memory_starts_again_rather_than_grow() -> None:
    ticks = Ticks()
    memory = AnswerMemory(monotonic=ticks, max_entries=2)
    memory.apply(Changes(), read_started=ticks.now)
    for key in ("a", "b", "c"):
        _remember(memory, key)
    assert memory.size() == 1
    assert memory.recall("c") == "c-answer"


def test_a_lapsed_memory_answers_nothing_until_read_again() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    _remember(memory, "mine")
    memory.lapse()
    assert memory.recall("mine") is None
    assert memory.stamp() is None


def test_a_round_count_needs_no_stamp_a_change_cannot_lower_it() -> None:
    # Read before a change of the agent, noted after it: still true (a counter never goes down).
    ticks = Ticks()
    memory = _live(ticks)
    memory.apply(Changes(agents=frozenset({AGENT})), read_started=ticks.now)
    memory.note_granted(ROUND, ORG, 5)
    assert memory.granted_in_round(ROUND, ORG)[0] == 5


def test_a_full_round_is_not_carried_into_the_next() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    memory.note_granted(ROUND, None, 25)
    assert memory.granted_in_round(ROUND, ORG)[1] == 25
    assert memory.granted_in_round(ROUND + timedelta(minutes=1), ORG) == (0, 0)


def test_a_lapsed_memory_notes_no_round_count() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    memory.lapse()
    memory.note_granted(ROUND, None, 25)
    memory.apply(Changes(), read_started=ticks.now)
    assert memory.granted_in_round(ROUND, ORG) == (0, 0)


def test_the_epoch_moves_when_everything_is_forgotten() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    first = memory.epoch
    memory.apply(Changes(agents=frozenset({AGENT})), read_started=ticks.now)
    assert memory.epoch == first  # one agent's change: the rest stays warm
    memory.apply(Changes(everything=True), read_started=ticks.now)
    assert memory.epoch is not None and memory.epoch != first
    memory.lapse()
    assert memory.epoch is None


def test_a_rounds_two_counts_are_read_together_and_are_nothing_once_the_memory_is_stale() -> None:
    ticks = Ticks()
    memory = _live(ticks)
    assert memory.granted_in_round(ROUND, ORG) == (0, 0)
    memory.note_granted(ROUND, ORG, 5)
    memory.note_granted(ROUND, None, 25)
    assert memory.granted_in_round(ROUND, ORG) == (5, 25)
    assert memory.granted_in_round(ROUND, OTHER) == (0, 25)  # another organisation's round
    assert memory.granted_in_round(ROUND + timedelta(minutes=1), ORG) == (0, 0)
    ticks.now += FRESHNESS_SECONDS
    assert memory.granted_in_round(ROUND, ORG) == (0, 0)  # not live: nothing is known
