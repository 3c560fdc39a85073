"""The demo's command line, validated into one frozen `DemoOptions` at start-up."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import NoReturn
from zoneinfo import ZoneInfo

from ground.instants import parse_day_text
from ground.whole_numbers import whole_number
from nachtwacht.demo_night.errors import DemoUsageError

__all__ = [
    "DEFAULT_SIZES",
    "DEFAULT_TIMEZONE",
    "DemoOptions",
    "build_parser",
    "parse_options",
]

DEFAULT_SIZES = (40, 8, 1)
DEFAULT_SPEED = 30.0
MAX_SPEED = 600.0
DEFAULT_PROCESS_LIMIT = 60
# The platform's default zone (its one wall-clock zone, a setting); the demo keeps the default.
DEFAULT_TIMEZONE = "Europe/Amsterdam"
MAX_AGENTS = 5000


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    org_sizes: tuple[int, ...]
    speed: float
    night_of: date
    keep: bool
    process_limit: int
    timezone: str = DEFAULT_TIMEZONE

    def __post_init__(self) -> None:
        if not self.org_sizes or any(size < 1 for size in self.org_sizes):
            raise DemoUsageError(
                f"--agents: {list(self.org_sizes)!r} must name at least one organisation, "
                "each with at least one agent"
            )
        if sum(self.org_sizes) > MAX_AGENTS:
            raise DemoUsageError(
                f"--agents: {sum(self.org_sizes)} agents in total is more than the demo's "
                f"{MAX_AGENTS} (use bench/fleet.py for a larger fleet)"
            )
        if not (math.isfinite(self.speed) and 0 < self.speed <= MAX_SPEED):
            raise DemoUsageError(
                f"--speed: {self.speed!r} is not a speed-up the demo can run "
                f"(expected a number above 0 and at most {MAX_SPEED:g}, e.g. 30)"
            )

    @property
    def agent_count(self) -> int:
        return sum(self.org_sizes)

    @property
    def real_processes(self) -> bool:
        """Every agent a real `nachtwacht agent run` process, or all simulated in one process."""
        return self.agent_count <= self.process_limit


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise DemoUsageError(f"{message} (see nachtwacht demo --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="nachtwacht demo",
        description=(
            "Start a control plane on an embedded PostgreSQL, sign two releases of a small demo "
            "agent, enroll a fleet, and play one night (02:50-03:30) on a fast clock."
        ),
    )
    parser.add_argument(
        "--agents",
        help="agents per organisation: one number for every org, or a list, e.g. 40,8,1 "
        "(default 40,8,1)",
    )
    parser.add_argument("--orgs", help="number of organisations (default: one per --agents size)")
    parser.add_argument(
        "--speed",
        default=str(DEFAULT_SPEED),
        help=f"how many times faster than real time the clock runs (default {DEFAULT_SPEED:g})",
    )
    parser.add_argument(
        "--date",
        help="the night to play, YYYY-MM-DD (default: tonight); 2026-10-25 or 2027-03-28 "
        "show a daylight-saving night",
    )
    parser.add_argument(
        "--process-limit",
        default=str(DEFAULT_PROCESS_LIMIT),
        help="above this many agents, simulate them in one process over the same HTTP API "
        f"instead of one `nachtwacht agent run` each (default {DEFAULT_PROCESS_LIMIT})",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the control plane, its database and the demo's files when done",
    )
    return parser


def _count(option: str, raw: str, what: str, *, example: int) -> int:
    number = whole_number(raw.strip())
    if number is None:
        raise DemoUsageError(
            f"{option}: {raw!r} is not a number of {what} (expected 0 or more, e.g. {example})"
        )
    return number


def _sizes(raw_agents: str | None, raw_orgs: str | None) -> tuple[int, ...]:
    orgs = None if raw_orgs is None else _count("--orgs", raw_orgs, "organisations", example=3)
    if orgs is not None and orgs < 1:
        raise DemoUsageError(f"--orgs: {orgs} must be at least 1")
    if raw_agents is None:
        count = orgs or len(DEFAULT_SIZES)
        return tuple(DEFAULT_SIZES[i % len(DEFAULT_SIZES)] for i in range(count))
    sizes = []
    for part in raw_agents.split(","):
        size = whole_number(part.strip())
        if size is None or size < 1:
            raise DemoUsageError(
                f"--agents: {raw_agents!r} is not a list of agent counts "
                "(expected positive whole numbers, e.g. 40,8,1 or 5)"
            )
        sizes.append(size)
    if len(sizes) == 1:
        return tuple(sizes * (orgs or 1))
    if orgs is not None and orgs != len(sizes):
        raise DemoUsageError(
            f"--agents: {raw_agents!r} gives {len(sizes)} organisation sizes but --orgs is {orgs} "
            "(give one size for every organisation, or one per organisation)"
        )
    return tuple(sizes)


def _speed(raw: str) -> float:
    try:
        return float(raw)
    except ValueError as exc:
        raise DemoUsageError(f"--speed: {raw!r} is not a number (expected e.g. 30)") from exc


def _night_of(raw: str | None, *, today: date) -> date:
    if raw is None:
        return today + timedelta(days=1)
    try:
        return parse_day_text(raw)
    except ValueError as exc:
        raise DemoUsageError(
            f"--date: {raw!r} is not a date (expected YYYY-MM-DD, e.g. 2026-10-25)"
        ) from exc


def parse_options(argv: list[str], *, now: datetime) -> DemoOptions:
    """`now` (aware) decides the default night: the coming one in the platform's zone."""
    args = build_parser().parse_args(argv)
    today = now.astimezone(ZoneInfo(DEFAULT_TIMEZONE)).date()
    return DemoOptions(
        org_sizes=_sizes(args.agents, args.orgs),
        speed=_speed(args.speed),
        night_of=_night_of(args.date, today=today),
        keep=args.keep,
        process_limit=_count(
            "--process-limit", args.process_limit, "agents", example=DEFAULT_PROCESS_LIMIT
        ),
    )
