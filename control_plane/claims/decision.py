"""The claim's decision from its facts: one pure function, whatever the facts were read from.

`refusal_for(facts, counts, slot_key, now)` answers a scheduled claim from what the database path
reads (the hot statement: the agent's schedule, its hold, the settings, the brake, the agent's
runs; then the release it is offered on the claim's pair, `claims.offered`) and the round's grant
counts. The database path runs it on the facts it just read; the answers' memory runs it on
facts it remembered with the counts it knows. The same facts give the same answer either way,
and there is no other copy of the rules to drift.

The refusals, in the contract's order (the first that applies wins):

1. what stops this agent, whatever the slot: `brake` (the operators stopped scheduled updates;
   consumes nothing), then `held` (a hold in force at `now`), `release_halted` (the offered
   release is halted or under its own brake) and `release_rolled_back` (this host rolled the
   offered release back since the last retry); these three consume the slot;
2. whether the slot is still there: `not_a_slot` (no such open slot of this agent's schedule,
   on the control plane's clock), `window_closed`, `slot_consumed` (a run already holds this
   slot, or the agent consumed a later one);
3. whether a new token could still be used: `window_closed` again in the window's last
   `grant_margin` (`claims.slots.too_late_to_grant`), where a download would not finish before
   the swap is refused; the same claim asked again keeps its grant;
4. the caps (`claims.caps`): this round is full for the organisation, or for the platform.

None means the facts refuse nothing: the claim goes on to the database, where the same claim
asked again gets its grant back and the grant counts it under the caps exactly (and checks the
brake and the release's halt again under their locks).

The offered release is not read when the brake or a hold already refuses: facts with
`offered=None` then mean "not asked", which no answer depends on while those stand (a brake
released or a hold lifted is a write that forgets the facts; a hold that ends is kept only until
its end).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from control_plane.claims.caps import Caps, RoundCounts, cap_refusal
from control_plane.claims.refused import (
    brake_on,
    held,
    release_halted,
    release_rolled_back,
    slot_consumed,
)
from control_plane.claims.slots import checked_slot, too_late_to_grant
from control_plane.errors import ClaimRefused
from control_plane.pins.holds import ActiveHold
from shared_planner import Slot

__all__ = ["ClaimFacts", "ExistingRun", "OfferedRelease", "refusal_for", "slot_of"]


@dataclass(frozen=True, kw_only=True)
class OfferedRelease:
    """The release this agent is offered on the claim's pair, as far as a claim cares."""

    release_id: UUID
    agent_version: str
    channel: str
    platform: str
    stopped: str | None  # why it is not granted now (halted, under its brake), else None
    rolled_back_run: UUID | None  # this agent's run that rolled it back since the last retry


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
    enrolled_at: datetime  # its slots close after it (`slots.agents_slot`)
    grant_margin: timedelta  # no new token in the window's last `grant_margin`
    caps: Caps
    brake_engaged: bool
    brake_reason: str | None
    last_consumed_at: datetime | None  # the latest slot of a scheduled run of this agent
    existing_run: ExistingRun | None
    hold: ActiveHold | None  # as stored: it stops the agent while `now` is before its end
    offered: OfferedRelease | None  # None: nothing is offered, or not read (see the module)

    @classmethod
    def of_row(cls, row: Mapping[str, Any], *, offered: OfferedRelease | None) -> ClaimFacts:
        """The facts of a row with the hot statement's columns, and the release offered."""
        run_id = row.get("existing_run_id")
        hold_until = row.get("hold_until")
        return cls(
            agent_id=row["agent_id"],
            org_id=row["org_id"],
            enabled=row["enabled"],
            times=tuple(row["times"]),
            timezone=row["timezone"],
            catch_up=timedelta(minutes=row["catch_up_minutes"]),
            enrolled_at=row["enrolled_at"],
            grant_margin=timedelta(seconds=row["grant_margin_seconds"]),
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
            hold=None
            if hold_until is None
            else ActiveHold(until=hold_until, reason=row["hold_reason"], set_by=row["hold_set_by"]),
            offered=offered,
        )

    def held_at(self, now: datetime) -> ActiveHold | None:
        """The agent's hold when it is in force at `now`."""
        return self.hold if self.hold is not None and now < self.hold.until else None


def slot_of(facts: ClaimFacts, slot_key: object, now: datetime) -> Slot:
    """The agent's open slot with this key, or its refusal raised (`not_a_slot`,
    `window_closed`)."""
    return checked_slot(
        slot_key,
        enabled=facts.enabled,
        times=facts.times,
        timezone=facts.timezone,
        catch_up=facts.catch_up,
        enrolled_at=facts.enrolled_at,
        now=now,
    )


def refusal_for(
    facts: ClaimFacts, counts: RoundCounts, slot_key: str, now: datetime
) -> ClaimRefused | None:
    """The refusal these facts give a claim of `slot_key` at `now` (see the module's docstring
    for the order), or None when they refuse nothing."""
    if facts.brake_engaged:
        return brake_on(facts.brake_reason)
    hold = facts.held_at(now)
    if hold is not None:
        return held(hold, slot_key)
    offered = facts.offered
    if offered is not None and offered.stopped is not None:
        return release_halted(
            offered.agent_version, offered.channel, offered.platform, offered.stopped, slot_key
        )
    if offered is not None and offered.rolled_back_run is not None:
        return release_rolled_back(offered.agent_version, offered.rolled_back_run, slot_key)
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
    too_late = too_late_to_grant(
        slot, slot_key, catch_up=facts.catch_up, grant_margin=facts.grant_margin, now=now
    )
    if too_late is not None:
        return too_late
    return cap_refusal(facts.caps, counts, now)
