"""A form that shows a secret once answers a second sending of itself with nothing new.

A browser's reload of the page that answered a form sends the form again ("resend"), and so does
going back and forward to it. For the forms that make a secret and show it once (a key issued or
rotated, a webhook's generated secret, an enrollment token, an invitation or a password reset
link) that would make a second secret, and end or replace the first one the reader may already
have copied (a rotated key, a webhook's secret, a person's new password). So each such form
carries a one-use token (`ONCE_FIELD`, a fresh random value in every page the panel renders);
the answer that shows the secret keeps the token as used in a cookie of its own (`ONCE_COOKIE`:
under /panel, HttpOnly, SameSite=Strict, the session's 12 hours at most, the last few tokens).
The same form sent again carries that token: the route makes nothing and the form's page says
the secret was shown already and stays valid.

The cookie holds random tokens only: nothing anyone typed, nothing secret. A token or cookie
that is not one is ignored (a form without a token, from a page an older release rendered, is
made as it always was).
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Form, Request
from fastapi.responses import Response

from control_plane.panel.web import PREFIX

__all__ = ["ONCE_COOKIE", "ONCE_FIELD", "Once", "already_sent", "remember_sent"]

ONCE_COOKIE = "nw_panel_once"
ONCE_FIELD = "once"
# The sessions' absolute limit: a form is not sent again after its session ended.
_SECONDS = 12 * 3600
# The most tokens kept: a reader with more pages that showed a secret open at once than this
# could send the oldest again.
_KEPT = 16
_TOKEN = re.compile(r"[A-Za-z0-9_-]{20,64}")

# The form's one-use token (`csrf.new_once_token`, put in every page as `once`).
Once = Annotated[str, Form(max_length=200)]


def _sent(request: Request) -> list[str]:
    kept = request.cookies.get(ONCE_COOKIE, "")
    return [token for token in kept.split(".") if _TOKEN.fullmatch(token)][-_KEPT:]


def already_sent(request: Request, presented: str) -> bool:
    """Whether this form, carrying the token `presented`, was answered before in this browser."""
    return _TOKEN.fullmatch(presented) is not None and presented in _sent(request)


def remember_sent(request: Request, response: Response, presented: str, *, secure: bool) -> None:
    """Keep `presented` as used on `response`, the answer that shows the form's secret."""
    if _TOKEN.fullmatch(presented) is None:
        return
    kept = [*_sent(request), presented][-_KEPT:]
    response.set_cookie(
        ONCE_COOKIE,
        ".".join(kept),
        max_age=_SECONDS,
        path=PREFIX,
        httponly=True,
        secure=secure,
        samesite="strict",
    )
