"""What an agent's poll says of its host besides asking for its config: which host answers for
the agent's identity, which trust root it holds, and its host's clock (the `Date` header, kept as
the offset from the control plane's clock).

Each is an agent's report, never a reason to refuse its poll: a value that cannot be read says
nothing. The poll read from the database stamps this in its own statement
(`agent_config.services`); answered from memory, the `SeenRecorder` notes it for a batch
(`answers_cache.seen`). Both read it from one `PollWord`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ground.instants import parse_http_date
from ground.limits import MAX_HOST_CLOCK_OFFSET_SECONDS

__all__ = ["NOTHING_SAID", "PollWord", "held_trust_root", "host_clock_off", "host_clock_offset"]

# The trust root version an agent says it holds: a positive integer the column can store.
_HELD_VERSION = re.compile(r"[1-9][0-9]{0,9}")
_MAX_HELD_VERSION = 2**31 - 1

# A `Date` further than this from the control plane's clock is not a host's clock, however
# broken (a dead clock battery starts at the firmware's date, years back), but a made-up value.
_MAX_PLAUSIBLE_CLOCK_OFFSET = timedelta(days=100 * 366)


def held_trust_root(header: str | None) -> int | None:
    """The version in the agent's trust root header; None when absent or not a positive integer."""
    if header is None or _HELD_VERSION.fullmatch(header) is None:
        return None
    version = int(header)
    return version if version <= _MAX_HELD_VERSION else None


def host_clock_offset(header: str | None, now: datetime) -> int | None:
    """The host's clock minus the control plane's `now`, in whole seconds, from the `Date` header
    of an agent's poll; None when absent, not an IMF-fixdate, or beyond belief."""
    said = parse_http_date(header)
    if said is None or abs(said - now) > _MAX_PLAUSIBLE_CLOCK_OFFSET:
        return None
    return round((said - now).total_seconds())


def host_clock_off(offset_seconds: int) -> bool:
    """Whether a host's clock, `offset_seconds` from the control plane's, is further off than the
    agent follows (it then plans on a wrong clock)."""
    return abs(offset_seconds) > MAX_HOST_CLOCK_OFFSET_SECONDS


@dataclass(frozen=True, kw_only=True)
class PollWord:
    """`host_id`: the host answering for the agent; `held`: the trust root version it holds;
    `clock`: its host's clock minus the control plane's, in seconds; `no_date`: the poll sent no
    `Date` at all (an agent of a release before contract 6), which removes a disagreement kept as
    a clock that agrees does. A `Date` sent but unreadable, or sent twice, says nothing either
    way (twice with two values never gets here: `api.deps.said_once` refuses it)."""

    host_id: str | None = None
    held: int | None = None
    clock: int | None = None
    no_date: bool = False

    @classmethod
    def read(
        cls,
        *,
        host_id: str | None,
        trust_root: str | None,
        dates: Sequence[str],
        now: datetime,
    ) -> PollWord:
        """The word of a poll from its headers: `dates` is every `Date` it sent."""
        return cls(
            host_id=host_id,
            held=held_trust_root(trust_root),
            clock=host_clock_offset(dates[0] if len(dates) == 1 else None, now),
            no_date=not dates,
        )

    @property
    def says_clock(self) -> bool:
        """Whether the poll said anything of its host's clock: a value, or that it has none."""
        return self.clock is not None or self.no_date

    @property
    def clock_off(self) -> bool:
        """Whether the host's clock it said is further off than the agent follows."""
        return self.clock is not None and host_clock_off(self.clock)


# A sighting that says nothing of its host: a claim, or a config read by the agent's id.
NOTHING_SAID = PollWord()
