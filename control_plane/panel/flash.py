"""The result of a form carried over its redirect (POST/redirect/GET): the form's route answers
303 to the page, which says the result once. A reload then shows the page again and posts
nothing.

The result travels in a cookie of its own (`DONE_COOKIE`: under /panel, HttpOnly, SameSite=Strict,
a minute at most) holding only a kind and counts (and a day), never text anyone typed; the page
reads it, words it in the reader's language and removes it. A value that is not such a result is
ignored (nothing is said)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Literal

from fastapi import Request
from fastapi.responses import Response

from control_plane.panel.i18n import Language
from control_plane.panel.web import PREFIX, redirect

__all__ = ["DONE_COOKIE", "Done", "done_text", "forget_done", "redirect_with", "take_done"]

DONE_COOKIE = "nw_panel_done"
_SECONDS = 60

DoneKind = Literal["held", "released", "asked", "schedules"]
_FORMAT = re.compile(r"(held|released|asked|schedules):([0-9]{1,9}):([0-9]{1,9})(?::([0-9-]{10}))?")


@dataclass(frozen=True)
class Done:
    """What a bulk form did: `first` the agents changed, `second` those left as they were (held
    so already, without a hold, with an update waiting, on the schedule already)."""

    kind: DoneKind
    first: int
    second: int
    day: date | None = None

    def cookie(self) -> str:
        day = "" if self.day is None else ":" + self.day.isoformat()
        return f"{self.kind}:{self.first}:{self.second}{day}"


def redirect_with(target: str, done: Done, *, secure: bool) -> Response:
    """303 to `target` (a panel path the caller built, its query escaped), the result with it."""
    response = redirect(target)
    response.set_cookie(
        DONE_COOKIE,
        done.cookie(),
        max_age=_SECONDS,
        path=PREFIX,
        httponly=True,
        secure=secure,
        samesite="strict",
    )
    return response


def take_done(request: Request) -> Done | None:
    """The result the request's cookie carries, if it is one (the caller removes the cookie)."""
    found = _FORMAT.fullmatch(request.cookies.get(DONE_COOKIE, ""))
    if found is None:
        return None
    kind, first, second, day_text = found.groups()
    day = None
    if day_text is not None:
        try:
            day = date.fromisoformat(day_text)
        except ValueError:
            return None
    if (kind == "held") != (day is not None):
        return None
    return Done(kind=kind, first=int(first), second=int(second), day=day)  # type: ignore[arg-type]


def forget_done(response: Response, *, secure: bool) -> None:
    response.delete_cookie(
        DONE_COOKIE, path=PREFIX, httponly=True, secure=secure, samesite="strict"
    )


def done_text(lang: Language, done: Done) -> str:
    """The result in the reader's words (the schedules' is the page's own, from its counts)."""
    if done.kind == "held":
        assert done.day is not None
        return _held_text(lang, done.first, done.second, lang.day(done.day))
    if done.kind == "released":
        return _ended_text(lang, done.first, done.second)
    return _asked_text(lang, done.first, done.second)


def _held_text(lang: Language, held: int, already: int, day: str) -> str:
    text = lang.ngettext(
        "%(count)s agent is held until %(day)s.",
        "%(count)s agents are held until %(day)s.",
        held,
        count=lang.number(held),
        day=day,
    )
    if already:
        said = lang.ngettext(
            "%(count)s agent was already held so: nothing changed for it.",
            "%(count)s agents were already held so: nothing changed for them.",
            already,
            count=lang.number(already),
        )
        text = said if not held else text + " " + said
    return text


def _ended_text(lang: Language, ended: int, without: int) -> str:
    text = lang.ngettext(
        "The hold of %(count)s agent ended.",
        "The holds of %(count)s agents ended.",
        ended,
        count=lang.number(ended),
    )
    if without:
        text += " " + lang.ngettext(
            "%(count)s agent had no hold.",
            "%(count)s agents had no hold.",
            without,
            count=lang.number(without),
        )
    return text


def _asked_text(lang: Language, asked: int, pending: int) -> str:
    text = lang.ngettext(
        "An update now was asked for %(count)s agent; it goes through the caps like any other.",
        "An update now was asked for %(count)s agents; each goes through the caps like any other.",
        asked,
        count=lang.number(asked),
    )
    if pending:
        text += " " + lang.ngettext(
            "%(count)s agent already had one waiting.",
            "%(count)s agents already had one waiting.",
            pending,
            count=lang.number(pending),
        )
    return text
