"""Each row of agents gets its schedule's slot; a schedule shared by many rows is planned once."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import cast

from psycopg.rows import DictRow

from control_plane.forecast.schedule_slots import with_slots

THREE = datetime(2026, 11, 2, 3, 0, tzinfo=UTC)
FIVE = datetime(2026, 11, 2, 5, 0, tzinfo=UTC)


def _row(org: str, times: list[str]) -> DictRow:
    return cast(DictRow, {"org": org, "times": json.dumps(times)})


def test_a_shared_schedule_is_planned_once_and_each_row_gets_its_slot() -> None:
    planned: list[tuple[str, ...]] = []

    def slot_of(times: tuple[str, ...]) -> datetime | None:
        planned.append(times)
        slots: dict[tuple[str, ...], datetime] = {("03:00",): THREE, ("05:00",): FIVE}
        return slots.get(times)

    rows = [_row("a", ["03:00"]), _row("b", ["05:00"]), _row("c", ["03:00"])]

    found = [(row["org"], at) for row, at in with_slots(rows, slot_of)]

    assert found == [("a", THREE), ("b", FIVE), ("c", THREE)]
    assert planned == [("03:00",), ("05:00",)]


def test_a_schedule_without_a_slot_leaves_its_rows_out_and_is_not_planned_again() -> None:
    planned: list[tuple[str, ...]] = []

    def slot_of(times: tuple[str, ...]) -> datetime | None:
        planned.append(times)
        return THREE if times == ("03:00",) else None

    rows = [_row("a", ["23:55"]), _row("b", ["03:00"]), _row("c", ["23:55"])]

    assert [at for _, at in with_slots(rows, slot_of)] == [THREE]
    assert planned == [("23:55",), ("03:00",)]
