"""The fleet by version: how many agents run each version, per (channel, platform), as a picture.

Read through the services only (the panel holds no SQL): every organisation's agents with the
version each reported (`AgentService.list_agents`, one query per organisation), and the releases
per pair (`ReleaseService.list`) to place a version in its pair. A version published for exactly
one pair is counted there; an agent whose version no pair published (a build from before the
platform knew it, or none reported yet) is counted under "pair not known".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from markupsafe import Markup

from control_plane.panel.charts import Series, Stack, stacked_chart
from control_plane.panel.i18n import Language

__all__ = ["FleetCount", "fleet_chart", "fleet_counts"]

# The most common versions get a colour each; the rest share one ("other versions").
SHOWN_VERSIONS = 6
UNKNOWN_PAIR = ""


@dataclass(frozen=True, kw_only=True)
class FleetCount:
    pair: str  # "stable/linux-x86_64", or UNKNOWN_PAIR
    version: str | None  # None: the agent has reported no version yet
    agents: int


def fleet_counts(
    versions: list[str | None], pairs_of_version: dict[str, set[str]]
) -> tuple[FleetCount, ...]:
    """Agents per (pair, version) from each agent's reported version."""
    counted: Counter[tuple[str, str | None]] = Counter()
    for version in versions:
        pairs = pairs_of_version.get(version or "", set())
        pair = next(iter(pairs)) if len(pairs) == 1 else UNKNOWN_PAIR
        counted[(pair, version)] += 1
    return tuple(
        FleetCount(pair=pair, version=version, agents=n)
        for (pair, version), n in sorted(
            counted.items(), key=lambda item: (item[0][0] == UNKNOWN_PAIR, item[0][0])
        )
    )


def fleet_chart(lang: Language, counts: tuple[FleetCount, ...]) -> Markup:
    """One column per pair, stacked by version (the most common versions each their colour)."""
    per_version: Counter[str | None] = Counter()
    for count in counts:
        per_version[count.version] += count.agents
    shown = [version for version, _ in per_version.most_common(SHOWN_VERSIONS)]
    others = any(version not in shown for version in per_version)
    pairs: list[str] = []
    for count in counts:
        if count.pair not in pairs:
            pairs.append(count.pair)

    def legend(version: str | None) -> str:
        return version if version is not None else lang.gettext("no version reported")

    series = [
        Series(legend=legend(version), css=f"chart-version-{index}")
        for index, version in enumerate(shown)
    ]
    if others:
        series.append(Series(legend=lang.gettext("other versions"), css="chart-version-other"))
    stacks = []
    for pair in pairs:
        here = {c.version: c.agents for c in counts if c.pair == pair}
        parts = [here.get(version, 0) for version in shown]
        if others:
            parts.append(sum(n for v, n in here.items() if v not in shown))
        stacks.append(Stack(label=pair or lang.gettext("pair not known"), parts=tuple(parts)))
    return stacked_chart(
        stacks,
        series=series,
        title=lang.gettext("Agents per version, per channel and platform"),
        empty_text=lang.gettext("No agents yet."),
        number=lambda n: lang.number(n),
    )
