"""The operators' pictures from data: the newer statuses and reasons appear when the data holds
them (never dropped, never a blank legend); the fleet by version places each agent in its pair."""

from __future__ import annotations

from datetime import UTC, datetime

from control_plane.agents.fleet import FleetVersionCount, FleetVersions
from control_plane.panel.fleet import UNKNOWN_PAIR, FleetCount, fleet_chart, fleet_counts
from control_plane.panel.i18n import Language
from control_plane.panel.operator_routes import _miss_reasons, _outcome_statuses
from control_plane.runs.services import SlotOutcomes

AT = datetime(2027, 3, 26, 2, 0, tzinfo=UTC)


def _slot(counts: dict[str, int], missed: dict[str, int] | None = None) -> SlotOutcomes:
    return SlotOutcomes(slot_at=AT, counts=counts, missed_by_reason=missed or {})


def test_an_unauthorised_switch_gets_its_own_column_only_when_it_happened() -> None:
    assert "unauthorised" not in _outcome_statuses((_slot({"succeeded": 3}),))
    statuses = _outcome_statuses((_slot({"succeeded": 3, "unauthorised": 1, "odd": 2}),))
    assert statuses[-2:] == ("unauthorised", "odd")


def test_a_rarer_miss_reason_appears_only_when_a_slot_missed_for_it() -> None:
    plain = _miss_reasons((_slot({"missed": 1}, {"offline": 1}),))
    assert plain == ("offline", "throttled", "brake", "unknown")
    rarer = _miss_reasons((_slot({"missed": 3}, {"held": 2, "solar_flare": 1}),))
    # A reason the panel does not know is still drawn (worded "reason unknown"), last.
    assert "held" in rarer and rarer[-1] == "solar_flare"
    assert "platform_unavailable" not in rarer


def _versions(*rows: tuple[str | None, str | None, int]) -> FleetVersions:
    return FleetVersions(
        counts=tuple(
            FleetVersionCount(
                channel=None if pair is None else pair.split("/")[0],
                platform=None if pair is None else pair.split("/")[1],
                version=version,
                agents=n,
            )
            for pair, version, n in rows
        )
    )


def test_the_pictures_columns_put_the_pairs_not_known_last() -> None:
    counts = fleet_counts(
        _versions((None, "2.0.0", 1), ("stable/linux-x86_64", "1.5.0", 2), (None, None, 1))
    )
    assert counts[0] == FleetCount(pair="stable/linux-x86_64", version="1.5.0", agents=2)
    assert FleetCount(pair=UNKNOWN_PAIR, version="2.0.0", agents=1) in counts
    assert FleetCount(pair=UNKNOWN_PAIR, version=None, agents=1) in counts


def test_the_fleet_picture_groups_rare_versions_and_words_them() -> None:
    counts = fleet_counts(_versions(*((("stable/linux-x86_64", f"1.{n}.0", 1)) for n in range(8))))
    svg = str(fleet_chart(Language("nl"), counts))
    assert "andere versies" in svg  # eight versions: six colours and "other versions"
    assert "stable/linux-x86_64" in svg


def test_every_pairs_name_stays_under_its_column_broken_at_its_slash() -> None:
    pairs = ("stable/linux-x86_64", "beta/linux-aarch64", "stable/windows-x86_64", None)
    counts = fleet_counts(_versions(*((pair, f"2.{n}.0", 3) for n, pair in enumerate(pairs))))
    svg = str(fleet_chart(Language("pl"), counts))
    for piece in ("stable/", "beta/", "linux-x86_64", "linux-aarch64", "windows-x86_64"):
        assert f">{piece}</text>" in svg
