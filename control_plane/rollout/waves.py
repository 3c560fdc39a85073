"""The waves of a rollout: an ordered plan every release of every pair follows.

A wave reaches a share of the pair's agents (`share_percent`) and, when it takes the canaries,
every agent and every organisation an operator marked as a canary. Waves are cumulative: an agent
reached by wave 2 is reached by every later wave too, and the share is judged on one stable
bucket per agent and release (`canary_bucket`), so the agents of the 10 % wave are among those of
the 50 % wave. So each wave before the last must reach someone the one before did not: a larger
share, or the canaries when no earlier wave takes them. The last wave is everyone (100 %); a
release there is at the `everyone` stage, a release in any earlier wave is at the `canary` stage
(the two stages older clients know).

Each wave has its own soak time and halt threshold; one left empty follows the rollout settings
(`soak_minutes`, `halt_failures`, `halt_rate_percent`). A release moves to the next wave when its
current wave soaked (a success after the wave began, then `soak` minutes without a halt), or
when a person promotes it.

The default plan, and why:

    1  the named canaries and 5 %   hosts whose owners asked to go first, plus a small random
                                   spread so every release meets the fleet's variety early
    2  10 %                        big enough that a fault hitting one host in fifty shows
    3  50 %                        half the fleet: the last look before everyone
    4  everyone

With the settings' 12-hour soak, a wave whose agents update at 03:00 has soaked by 15:00 and
the next wave takes the release the following night: four nights from publishing to everyone,
each night reaching a few times more hosts than the one before, so a fault that slipped past
one wave's threshold is caught while most of the fleet still runs the previous release.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from control_plane.errors import InvalidInput
from control_plane.types import Connection

__all__ = [
    "MAX_WAVES",
    "WAVE_BOUNDS",
    "Wave",
    "effective_wave",
    "first_wave",
    "newcomers_refusal",
    "parse_plan",
    "read_plan",
    "write_plan",
]

MAX_WAVES = 10

# The database's CHECK bounds of one wave's numbers, named once for the validation messages.
WAVE_BOUNDS: dict[str, tuple[int, int]] = {
    "share_percent": (0, 100),
    "soak_minutes": (0, 20160),
    "halt_failures": (1, 100000),
    "halt_rate_percent": (1, 100),
}

_OPTIONAL = ("soak_minutes", "halt_failures", "halt_rate_percent")


@dataclass(frozen=True, kw_only=True)
class Wave:
    position: int
    share_percent: int
    # The agents and organisations marked as canaries are in this wave (and every later one).
    canaries: bool
    # None: the rollout settings' value.
    soak_minutes: int | None
    halt_failures: int | None
    halt_rate_percent: int | None


def read_plan(conn: Connection) -> tuple[Wave, ...]:
    rows = conn.execute(
        "SELECT position, share_percent, canaries, soak_minutes, halt_failures,"
        " halt_rate_percent FROM rollout_waves ORDER BY position"
    ).fetchall()
    assert rows, "the waves migration inserts the default plan"
    return tuple(Wave(**row) for row in rows)


def _whole(field: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(field, value, f"is not a whole number from {low} to {high}")
    return value


def parse_plan(value: object) -> tuple[Wave, ...]:
    """A plan from its JSON form (a list of objects), or a 422 naming the bad field."""
    if not isinstance(value, list | tuple) or not 1 <= len(value) <= MAX_WAVES:
        raise InvalidInput("waves", value, f"is not a list of 1 to {MAX_WAVES} waves")
    waves = []
    for index, item in enumerate(value):
        where = f"waves[{index}]"
        if not isinstance(item, dict):
            raise InvalidInput(where, item, "is not an object")
        unknown = sorted(set(item) - {"share_percent", "canaries", *_OPTIONAL})
        if unknown:
            raise InvalidInput(f"{where}.{unknown[0]}", item[unknown[0]], "is not a wave field")
        share = _whole(f"{where}.share_percent", item.get("share_percent"), 0, 100)
        canaries = item.get("canaries", False)
        if not isinstance(canaries, bool):
            raise InvalidInput(f"{where}.canaries", canaries, "is not true or false")
        optional: dict[str, Any] = {}
        for name in _OPTIONAL:
            raw = item.get(name)
            bounds = WAVE_BOUNDS[name]
            optional[name] = None if raw is None else _whole(f"{where}.{name}", raw, *bounds)
        if share == 0 and not canaries and index < len(value) - 1:
            raise InvalidInput(
                f"{where}.share_percent", share, "reaches nobody: give it a share or the canaries"
            )
        waves.append(Wave(position=index + 1, share_percent=share, canaries=canaries, **optional))
    for index in range(1, len(waves) - 1):
        refusal = newcomers_refusal(waves[: index + 1])
        if refusal is not None:
            raise InvalidInput(f"waves[{index}].share_percent", waves[index].share_percent, refusal)
    if waves[-1].share_percent != 100:
        raise InvalidInput(
            f"waves[{len(waves) - 1}].share_percent",
            waves[-1].share_percent,
            "is not 100: the last wave is everyone",
        )
    return tuple(waves)


def newcomers_refusal(waves: Sequence[Wave]) -> str | None:
    """Why the last of `waves` reaches no agent the waves before it did not, else None. Such a
    wave before the plan's last only delays the rollout by its soak: a share no larger than the
    one before takes nobody new (the shares are cumulative), and the canaries are new only to the
    first wave that takes them."""
    *earlier, wave = waves
    if not earlier:
        return None
    before = earlier[-1].share_percent
    if wave.share_percent > before or (
        wave.canaries and not any(prior.canaries for prior in earlier)
    ):
        return None
    return (
        f"reaches no agent wave {wave.position - 1} does not: the shares are cumulative, so give"
        f" it more than {before} % (or the canaries, if no earlier wave takes them)"
    )


def write_plan(conn: Connection, plan: Sequence[Wave]) -> None:
    conn.execute("DELETE FROM rollout_waves")
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO rollout_waves (position, share_percent, canaries, soak_minutes,"
            " halt_failures, halt_rate_percent) VALUES (%s, %s, %s, %s, %s, %s)",
            [
                (
                    wave.position,
                    wave.share_percent,
                    wave.canaries,
                    wave.soak_minutes,
                    wave.halt_failures,
                    wave.halt_rate_percent,
                )
                for wave in plan
            ],
        )


def effective_wave(stage: str, wave: int, waves: int) -> int:
    """The wave a release is in: the last at `everyone`; in the `canary` stage its own, but never
    the last (the plan may have shrunk since it was promoted)."""
    if stage == "everyone":
        return waves
    return max(1, min(wave, waves - 1))


def first_wave(plan: Sequence[Wave], *, marked: bool, bucket: int, buckets: int) -> int:
    """The first wave that reaches an agent: it is marked a canary (itself or its organisation)
    and the wave takes the canaries, or its bucket (0…buckets-1) falls in the wave's share."""
    for wave in plan:
        if (marked and wave.canaries) or bucket < wave.share_percent * (buckets // 100):
            return wave.position
    return plan[-1].position
