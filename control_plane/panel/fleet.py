"""The fleet by version: how many agents run each version, per (channel, platform), as a picture.

The counts come from one query (`control_plane.agents.fleet.FleetService.versions`): each live
agent on the pair it follows, else on the one pair its version was published for, else under
"pair not known".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from markupsafe import Markup

from control_plane.agents.fleet import FleetVersions
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


def fleet_counts(versions: FleetVersions) -> tuple[FleetCount, ...]:
    """The picture's columns from the service's counts, the known pairs first."""
    counts = [
        FleetCount(
            pair=UNKNOWN_PAIR if c.channel is None else f"{c.channel}/{c.platform}",
            version=c.version,
            agents=c.agents,
        )
        for c in versions.counts
    ]
    return tuple(sorted(counts, key=lambda count: (count.pair == UNKNOWN_PAIR, count.pair)))


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
