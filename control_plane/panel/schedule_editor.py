"""The schedule editor's form: rows as typed, the problem placed next to its row, the preview.

The form may hold blank rows (just added); they are left out before the planner judges the list,
and the planner's index is mapped back to the row the reader sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from control_plane.panel.i18n import Language
from control_plane.panel.wording import PreviewNight, schedule_problem_text, slot_notes
from shared_planner import parse_times, plan_slots
from shared_planner.schedule_problems import ScheduleProblem, schedule_problem

__all__ = ["PREVIEW_NIGHTS", "EditorState", "check_rows", "editor_preview", "preview"]

PREVIEW_NIGHTS = 7
MAX_ROWS = 288


@dataclass(frozen=True, kw_only=True)
class EditorState:
    enabled: bool
    rows: list[str]
    row_errors: dict[int, str]  # row index -> message
    list_error: str | None  # a problem of the list as a whole

    @property
    def has_errors(self) -> bool:
        return bool(self.row_errors or self.list_error)

    @property
    def times(self) -> list[str]:
        return [row.strip() for row in self.rows if row.strip()]


def check_rows(lang: Language, *, enabled: bool, rows: list[str]) -> EditorState:
    rows = rows[: MAX_ROWS + 1]
    filled = [(i, row.strip()) for i, row in enumerate(rows) if row.strip()]
    values = [value for _, value in filled]
    problem: ScheduleProblem | None = None
    if values or enabled:
        problem = schedule_problem(values)
    row_errors: dict[int, str] = {}
    list_error = None
    if problem is not None:
        text = schedule_problem_text(lang, problem)
        if problem.index is not None and problem.index < len(filled):
            row_errors[filled[problem.index][0]] = text
        else:
            list_error = text
    return EditorState(enabled=enabled, rows=rows, row_errors=row_errors, list_error=list_error)


def preview(
    lang: Language, times: list[str], *, zone: ZoneInfo, now: datetime
) -> list[PreviewNight]:
    """The slots of the next nights, grouped by their local day, with daylight saving notes."""
    walls = parse_times(times)
    planned = plan_slots(walls, start=now, end=now + timedelta(days=PREVIEW_NIGHTS), tz=zone)
    nights: list[PreviewNight] = []
    for item in planned:
        heading = lang.weekday_day(item.slot.day)
        entry = (lang.time_with_zone(item.slot.at, zone), slot_notes(lang, item, zone))
        if nights and nights[-1].heading == heading:
            nights[-1].slots.append(entry)
        else:
            nights.append(PreviewNight(heading=heading, slots=[entry]))
    return nights


def editor_preview(
    lang: Language, editor: EditorState, *, zone: ZoneInfo, now: datetime
) -> list[PreviewNight]:
    """The preview of what the editor holds: none while the schedule is off, has a problem or
    holds no time (a preview of a list the planner refuses would promise slots that never come)."""
    if not editor.enabled or editor.has_errors or not editor.times:
        return []
    return preview(lang, editor.times, zone=zone, now=now)
