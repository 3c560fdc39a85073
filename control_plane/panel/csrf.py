"""CSRF tokens for the panel's forms.

A signed-in form carries a token derived from the session's secret (HMAC), which a page of another
site can neither read nor compute. The sign-in form, before any session exists, carries the value
of a short-lived cookie of its own (double submit). Both cookies are SameSite=Strict, which already
keeps other sites' forms from sending them; the token is the second, independent lock.

The sessions themselves are the accounts domain's (`SessionService`): a session ends with its key.
"""

from __future__ import annotations

import hmac
import secrets

__all__ = ["csrf_token_for", "new_once_token", "new_signin_token", "tokens_match"]


def csrf_token_for(session_secret: str) -> str:
    """The CSRF token of the session whose cookie holds `session_secret`."""
    return hmac.new(session_secret.encode("utf-8"), b"nachtwacht panel csrf", "sha256").hexdigest()


def new_signin_token() -> str:
    return secrets.token_urlsafe(32)


def new_once_token() -> str:
    """A form's one-use token, fresh in every page (`once.py`): random, and no secret."""
    return secrets.token_urlsafe(18)


def tokens_match(expected: str | None, presented: str | None) -> bool:
    if not expected or not presented:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), presented.encode("utf-8"))
