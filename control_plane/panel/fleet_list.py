"""The customer's agent list for a large organisation: the view in the URL (search, state, order,
page) read and checked field by field, its page fetched from the agents' service, and the bulk
changes — one schedule, a hold, the end of a hold, an update now — for the selected agents or for
every agent of the view.

A change for every agent of the view names the number of agents the reader saw on its button and
sends it: when the view finds another number by the time the change arrives (agents enrolled,
a filter's state changed), nothing changes and the reader is shown the new number to confirm.
There is no other ceiling: a hold and a schedule are undone as easily, and updates go through
the caps whatever their number.

A bad parameter is an error at its field in the reader's language, never a server error; the
view is a GET form, so a bookmark reproduces it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal
from urllib.parse import urlencode
from uuid import UUID

from starlette.datastructures import QueryParams

from control_plane.agents.agent_list import (
    AGENT_SORTS,
    AGENT_STATES,
    MAX_SEARCH_LENGTH,
    PAGE_SIZE,
    AgentQuery,
    AgentSort,
    AgentState,
    ScheduleChanges,
)
from control_plane.agents.org_summary import OrgAgentSummary
from control_plane.agents.services import AgentOverview
from control_plane.events.trail import Actor
from control_plane.panel import rollout_wording
from control_plane.panel.backend import missing_or_refused
from control_plane.panel.form_refusal import (
    SHOWN_CHARACTERS,
    given_twice,
    not_plain,
    not_sent_by_form,
    not_whole_in_range,
    too_long,
    two_values,
)
from control_plane.panel.i18n import Language
from control_plane.panel.schedule_editor import EditorState, check_rows
from control_plane.panel.web import whole_number
from control_plane.panel.wording import ONLINE_WITHIN
from control_plane.pins.holds import MAX_HOLD, MAX_HOLD_REASON_LENGTH
from control_plane.registry import Services
from ground.contract.plain_text import first_bidi_control, first_control_character, shown

__all__ = [
    "BULK_ACTIONS",
    "MAX_SELECTED",
    "MAX_TIMES_TEXT",
    "SORT_CHOICES",
    "STATE_CHOICES",
    "BulkAction",
    "BulkSchedule",
    "FleetView",
    "bulk_action",
    "bulk_schedule",
    "changed_count",
    "fleet_page",
    "fleet_summary",
    "read_view",
    "reason_problem",
    "set_schedules",
    "typed_schedule",
]

# A selection is made on one page.
MAX_SELECTED = PAGE_SIZE
# The times as typed, "02:00, 04:30": 288 times of five characters and their separators.
MAX_TIMES_TEXT = 2000
# The order's value in the URL: the key, with a leading "-" for the other direction.
SORT_CHOICES: tuple[str, ...] = tuple(value for sort in AGENT_SORTS for value in (sort, f"-{sort}"))
STATE_CHOICES: tuple[str, ...] = AGENT_STATES
BulkActionName = Literal["hold", "release", "update"]
BULK_ACTIONS: tuple[BulkActionName, ...] = ("hold", "release", "update")


@dataclass(frozen=True, kw_only=True)
class FleetView:
    """The view as the URL gave it (its fields as typed, for the form) and, when every field
    could be read, the query it asks for; `errors` holds a message per bad field."""

    search: str = ""
    state: str = ""
    sort: str = "name"
    page: str = "1"
    query: AgentQuery | None = None
    errors: dict[str, str] = field(default_factory=dict)

    def url_query(self, **changes: str) -> str:
        """The view's query string (with `changes`), the defaults left out, for links."""
        values = {"q": self.search, "state": self.state, "sort": self.sort, "page": self.page}
        values.update(changes)
        kept = {
            key: value
            for key, value in values.items()
            if value and (key, value) not in {("sort", "name"), ("page", "1")}
        }
        return urlencode(kept)


def read_view(lang: Language, params: QueryParams) -> FleetView:
    """The view named by the URL's `q`, `state`, `sort` and `page`, each checked on its own and
    said with the value typed; one given twice with two values is refused at its field."""
    search = params.get("q", "")
    state = params.get("state", "")
    sort = params.get("sort", "") or "name"
    page_text = params.get("page", "") or "1"
    errors: dict[str, str] = {}
    if len(search) > MAX_SEARCH_LENGTH:
        errors["q"] = too_long(lang, "q", search, MAX_SEARCH_LENGTH)
    elif "\x00" in search:
        errors["q"] = not_plain(lang, "q", search) or ""
    if state and state not in STATE_CHOICES:
        errors["state"] = not_sent_by_form(lang, "state", state)
    if sort not in SORT_CHOICES:
        errors["sort"] = not_sent_by_form(lang, "sort", sort)
    for name, (first, other) in given_twice(params.multi_items()).items():
        if name in {"q", "state", "sort", "page"}:
            errors[name] = two_values(lang, name, first, other)
    page = whole_number(page_text) or 0
    shown = FleetView(
        search=search[:MAX_SEARCH_LENGTH] if "q" in errors else search,
        state=state[:50],
        sort=sort[:50],
        # Enough of it to say it back, shortened, when it is not a page.
        page=page_text[: SHOWN_CHARACTERS + 1],
    )
    if errors:
        return _with(shown, errors=errors)
    query = AgentQuery(
        search=search.strip(),
        state=_state(state),
        sort=_sort(sort.removeprefix("-")),
        descending=sort.startswith("-"),
        page=max(page, 1),
    )
    if page < 1:
        # The page's message names the last page, which only the list's count can tell.
        return _with(shown, query=query, errors={"page": ""})
    return _with(shown, query=query)


def _with(
    view: FleetView, *, query: AgentQuery | None = None, errors: dict[str, str] | None = None
) -> FleetView:
    return FleetView(
        search=view.search,
        state=view.state,
        sort=view.sort,
        page=view.page,
        query=query,
        errors=errors or {},
    )


def _state(text: str) -> AgentState | None:
    return next((state for state in AGENT_STATES if state == text), None)


def _sort(text: str) -> AgentSort:
    return next(sort for sort in AGENT_SORTS if sort == text)


def fleet_page(
    services: Services, lang: Language, org_id: UUID, view: FleetView, *, now: datetime
) -> tuple[FleetView, AgentOverview | None]:
    """The view's page of agents, or None when a field is wrong; a page number that is not one
    of the list's pages is an error at its field, naming the last page."""
    if view.query is None:
        return view, None
    overview = services.agents.overview(
        org_id, now=now, query=view.query, online_since=now - ONLINE_WITHIN
    )
    if "page" in view.errors or overview.page > overview.pages:
        message = not_whole_in_range(lang, "page", view.page, 1, overview.pages)
        return _with(view, query=view.query, errors={"page": message}), None
    return view, overview


def fleet_summary(services: Services, org_id: UUID, *, now: datetime) -> OrgAgentSummary:
    """The organisation's agents per state of the list (with the list's idea of "offline") and
    per coming slot: what the operator's page shows above its page of agents."""
    return services.agents.org_summary(org_id, now=now, online_since=now - ONLINE_WITHIN)


@dataclass(frozen=True, kw_only=True)
class BulkSchedule:
    """The bulk form as typed: its times, switch and selection, and its problems by field."""

    enabled: bool
    times_text: str
    editor: EditorState
    selected: tuple[UUID, ...]
    errors: dict[str, str]


_SEPARATORS = re.compile(r"[,;\s]+")


def bulk_schedule(
    lang: Language,
    *,
    enabled: bool,
    times_text: str,
    target: str,
    selected: list[UUID],
) -> BulkSchedule:
    """The bulk form checked: the schedule with the one-agent editor's rules, and a selection
    of one page's agents when the target is the selection."""
    text, editor, problem = typed_schedule(lang, enabled=enabled, times_text=times_text)
    errors: dict[str, str] = {}
    if problem is not None:
        errors["times"] = problem
    problem = _selection_problem(lang, target=target, selected=selected)
    if problem is not None:
        errors["agent"] = problem
    return BulkSchedule(
        enabled=enabled,
        times_text=text,
        editor=editor,
        selected=tuple(dict.fromkeys(selected)),
        errors=errors,
    )


def typed_schedule(
    lang: Language, *, enabled: bool, times_text: str
) -> tuple[str, EditorState, str | None]:
    """Times typed on one line ("02:00, 04:30") checked with the one-agent editor's rules: the
    text as kept, the editor's state and its first problem (None: none)."""
    text = times_text[:MAX_TIMES_TEXT]
    rows = [part for part in _SEPARATORS.split(text) if part]
    editor = check_rows(lang, enabled=enabled, rows=rows)
    problems = list(editor.row_errors.values()) + ([editor.list_error] if editor.list_error else [])
    return text, editor, problems[0] if problems else None


def set_schedules(
    services: Services,
    org_id: UUID,
    form: BulkSchedule,
    *,
    query: AgentQuery | None,
    now: datetime,
    actor: Actor,
) -> ScheduleChanges:
    """Store a schedule the form already checked on the selection (`query` None) or on every
    agent of the view; the service checks it again and the database a third time."""
    with missing_or_refused(str(org_id)):
        return services.agents.set_schedules(
            org_id,
            agent_ids=None if query is not None else form.selected,
            query=query,
            enabled=form.enabled,
            times=form.editor.times,
            now=now,
            online_since=now - ONLINE_WITHIN,
            actor=actor,
        )


def changed_count(
    services: Services,
    lang: Language,
    org_id: UUID,
    query: AgentQuery,
    shown: str,
    *,
    now: datetime,
) -> tuple[tuple[UUID, ...], str | None]:
    """Every agent of the view, and a message when their number is not `shown` (the number
    the button named): the view changed since the reader saw it."""
    ids = services.agents.matching_ids(org_id, query, now=now, online_since=now - ONLINE_WITHIN)
    if shown.strip() == str(len(ids)):
        return ids, None
    return ids, lang.ngettext(
        "This view now finds %(count)s agent, not the number on the button: check the list"
        " and choose again.",
        "This view now finds %(count)s agents, not the number on the button: check the list"
        " and choose again.",
        len(ids),
        count=lang.number(len(ids)),
    )


@dataclass(frozen=True, kw_only=True)
class BulkAction:
    """The bulk actions' form as typed: the action, a hold's day and reason, the selection, and
    the problems by field (`until`, `reason`, `agent`, `count`)."""

    action: BulkActionName
    until_text: str
    reason: str
    until: datetime | None
    selected: tuple[UUID, ...]
    errors: dict[str, str]


def bulk_action(
    lang: Language,
    *,
    action: BulkActionName,
    until_text: str,
    until: datetime | None,
    reason: str,
    target: str,
    selected: list[UUID],
    now: datetime,
) -> BulkAction:
    """The bulk actions' form checked: a hold needs a day after today within the hold's bound
    and a reason; a selection is one page's agents."""
    errors: dict[str, str] = {}
    if action == "hold":
        if until is None or until <= now or until > now + MAX_HOLD:
            errors["until"] = rollout_wording.hold_problem(lang, "until")
        problem = reason_problem(lang, reason)
        if problem is not None:
            errors["reason"] = problem
    reason = reason.strip()
    problem = _selection_problem(lang, target=target, selected=selected)
    if problem is not None:
        errors["agent"] = problem
    return BulkAction(
        action=action,
        until_text=until_text[:40],
        reason=reason[:MAX_HOLD_REASON_LENGTH],
        until=until,
        selected=tuple(dict.fromkeys(selected)),
        errors=errors,
    )


def _selection_problem(lang: Language, *, target: str, selected: list[UUID]) -> str | None:
    """What is wrong with a bulk form's selection (None: nothing): aimed at the selected agents,
    it holds one page's agents at the most, and one at the least."""
    if target == "selected" and not 1 <= len(selected) <= MAX_SELECTED:
        return lang.gettext(
            "Select between 1 and %(count)s agents on this page.",
            count=lang.number(MAX_SELECTED),
        )
    return None


def reason_problem(lang: Language, typed: str) -> str | None:
    """What is wrong with a hold's reason as typed (None: nothing), naming the field, the value
    and what is expected: it is kept on the trail and shown to the host's admin, so it must say
    something, fit its bound and be plain text (a control character could rewrite a terminal's
    screen where `nachtwacht agent status` shows it)."""
    reason = typed.strip()
    limit = lang.number(MAX_HOLD_REASON_LENGTH)
    if not typed:
        return lang.gettext(
            "Reason: empty. Say why the updates are held, in at most %(count)s characters.",
            count=limit,
        )
    if not reason:
        return lang.gettext(
            "Reason: only spaces. Say why the updates are held, in at most %(count)s characters.",
            count=limit,
        )
    if len(reason) > MAX_HOLD_REASON_LENGTH:
        return lang.gettext(
            "Reason: “%(start)s…” is too long (%(length)s characters). Say why the updates are"
            " held, in at most %(count)s characters.",
            start=shown(reason[:40]),
            length=lang.number(len(reason)),
            count=limit,
        )
    # A bidirectional control is one too: it would show the rest of the line in another order.
    control = first_control_character(reason) or first_bidi_control(reason)
    if control is not None:
        return lang.gettext(
            "Reason: “%(value)s” contains a control character (%(code)s). Say why the updates"
            " are held, in plain text of at most %(count)s characters.",
            value=shown(reason[:80]) + ("…" if len(reason) > 80 else ""),
            code=f"U+{ord(control):04X}",
            count=limit,
        )
    return None
