"""The claim's decision from its facts: one pure function, whatever the facts were read from.

`refusal_for(facts, counts, slot_key, now)` answers a scheduled claim from what the hot
statement reads in one round trip (the agent's schedule, the settings, the brake, the agent's
runs) and the round's grant counts. The database path runs it on the row it just read; the
answers' memory runs it on a row it remembered with the counts it knows. The same facts give the
same answer either way, and there is no other copy of the rules to drift.

The refusals, in the order they are given (the first that applies wins):

1. `brake` — the operators stopped scheduled updates: nothing else matters until it is released;
2. the refusals that consume the slot: `not_a_slot` (no such open slot of this agent's schedule,
   on the control plane's clock), `window_closed`, `slot_consumed` (a run already holds this
   slot, or the agent consumed a later one);
3. the caps (`claims.caps`): this round is full for the organisation, or for the platform.

None means the facts refuse nothing: the claim goes on to the database, where the same claim
asked again gets its grant back, and where the checks that need more than these facts are made
(a hold or a halted release, a release this host rolled back; see `ClaimService`) before the grant
counts it under the caps exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from control_plane.claims.caps import Caps, RoundCounts, cap_refusal
from control_plane.claims.refused import brake_on, slot_consumed
from control_plane.claims.slots import checked_slot
from control_plane.errors import ClaimRefused
from shared_planner import Slot

__all__ = ["ClaimFacts", "ExistingRun", "refusal_for", "slot_of"]


@dataclass(frozen=True, kw_only=True)
class ExistingRun:
    """The agent's run for the claimed slot."""

    run_id: UUID
    status: str
    token_usable: bool  # neither revoked nor expired at the read's `now`

    @property
    def holds_its_token(self) -> bool:
        """Claimed with a usable token: the same claim asked again gets the same grant."""
        return self.status == "claimed" and self.token_usable


@dataclass(frozen=True, kw_only=True)
class ClaimFacts:
    """What a scheduled claim is decided on, as the hot statement reads it (without the round's
    counts: those are `RoundCounts`, known apart)."""

    agent_id: UUID
    org_id: UUID
    enabled: bool
    times: tuple[str, ...]
    timezone: str
    catch_up: timedelta
    caps: Caps
    brake_engaged: bool
    brake_reason: str | None
    last_consumed_at: datetime | None  # the latest slot of a scheduled run of this agent
    existing_run: ExistingRun | None

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> ClaimFacts:
        """The facts of a row with the hot statement's columns."""
        run_id = row.get("existing_run_id")
        return cls(
            agent_id=row["agent_id"],
            org_id=row["org_id"],
            enabled=row["enabled"],
            times=tuple(row["times"]),
            timezone=row["timezone"],
            catch_up=timedelta(minutes=row["catch_up_minutes"]),
            caps=Caps(org_cap=row["org_cap"], global_cap=row["global_cap"]),
            brake_engaged=row["brake_engaged"],
            brake_reason=row["brake_reason"],
            last_consumed_at=row["last_consumed_at"],
            existing_run=None
            if run_id is None
            else ExistingRun(
                run_id=run_id,
                status=row["existing_status"],
                token_usable=bool(row["existing_token_usable"]),
            ),
        )


def slot_of(facts: ClaimFacts, slot_key: object, now: datetime) -> Slot:
    """The agent's open slot with this key, or its refusal raised (`not_a_slot`,
    `window_closed`)."""
    return checked_slot(
        slot_key,
        enabled=facts.enabled,
        times=facts.times,
        timezone=facts.timezone,
        catch_up=facts.catch_up,
        now=now,
    )


def refusal_for(
    facts: ClaimFacts, counts: RoundCounts, slot_key: str, now: datetime
) -> ClaimRefused | None:
    """The refusal these facts give a claim of `slot_key` at `now` (see the module's docstring
    for the order), or None when they refuse nothing."""
    if facts.brake_engaged:
        return brake_on(facts.brake_reason)
    try:
        slot = slot_of(facts, slot_key, now)
    except ClaimRefused as refused:
        return refused
    run = facts.existing_run
    if run is not None:
        if run.status != "claimed":
            return slot_consumed(slot_key, f"was already consumed ({run.status})")
        if run.token_usable:
            return None  # the same claim again: its grant, whatever the round's counts
        # Its token was revoked (the brake) or ran out: a new lease, through the caps.
    elif facts.last_consumed_at is not None and slot.at <= facts.last_consumed_at:
        return slot_consumed(slot_key, "is at or before a slot this agent has already consumed")
    return cap_refusal(facts.caps, counts, now)
