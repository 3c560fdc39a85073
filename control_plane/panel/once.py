"""A form that shows a secret once makes it once, however often and however fast it is sent.

A browser's reload of the page that answered a form sends the form again ("resend"), and so does
going back and forward to it, and a double click sends it twice before the first answer is back.
For the forms that make a secret and show it once (a key issued or rotated, a webhook's generated
secret, an enrollment token, an invitation or a password reset link) that would make a second
secret, and end or replace the first one the reader may already have copied (a rotated key, a
webhook's secret, a person's new password). So each such form carries a one-use token
(`ONCE_FIELD`, a fresh random value in every page the panel renders), and the control plane
takes it, in the database, for as long as the secret is being made (`SessionService.made_once`):
the same form sent again, at once or later, on any replica, makes nothing and the form's page
says the secret was shown already and stays valid. A form that was refused leaves its token
untaken, so sending it again is answered as it was.

A token that is not one is ignored (a form without a token, from a page an older release
rendered, is made as it always was).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, TypeVar

from fastapi import Form

from control_plane.accounts.sessions import ONCE_FORM_PATTERN
from control_plane.registry import Services

__all__ = ["ONCE_FIELD", "Once", "made_once"]

ONCE_FIELD = "once"
_TOKEN = re.compile(ONCE_FORM_PATTERN)

# The form's one-use token (`csrf.new_once_token`, put in every page as `once`).
Once = Annotated[str, Form(max_length=200)]

_Made = TypeVar("_Made")


def made_once(
    services: Services, presented: str, make: Callable[[], _Made], *, now: datetime
) -> _Made | None:
    """What `make()` made, or None when the form carrying the token `presented` made its secret
    already. What `make()` raises (a refusal) is raised, and the token stays untaken."""
    if _TOKEN.fullmatch(presented) is None:
        return make()
    return services.sessions.made_once(presented, make, now=now)
