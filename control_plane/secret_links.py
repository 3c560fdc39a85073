"""The panel's addresses that are secrets themselves, and the access log written without them.

An invitation or password-reset link holds its one-time token as the path's last part
(`/panel/invitation/<token>`, `/panel/reset/<token>`); the way back from an organisation's
OpenID Connect provider holds the sign-in's code and state in its query
(`/panel/oidc/callback?code=…&state=…`). Whoever reads a log must not be able to use them, so the
access log (`serve --log-level info`) writes these addresses with the secret part replaced. The
shipped nginx site does the same for its own log (`packaging/nginx/nachtwacht.conf`).
"""

from __future__ import annotations

import logging
import re

__all__ = ["ACCESS_LOGGER", "SecretLinksHidden", "logged_path"]

ACCESS_LOGGER = "uvicorn.access"

_TOKEN_IN_PATH = re.compile(r"^(/panel/(?:invitation|reset)/)[^/?]*")
_QUERY_SECRET = re.compile(r"^(/panel/oidc/callback)\?.*", re.DOTALL)


def logged_path(path: str) -> str:
    """`path` (with its query) as a log may write it."""
    path = _TOKEN_IN_PATH.sub(r"\1(token)", path, count=1)
    return _QUERY_SECRET.sub(r"\1?(query)", path, count=1)


class SecretLinksHidden(logging.Filter):
    """On uvicorn's access logger: its record's third argument is the path with the query."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], logged_path(args[2]), *args[3:])
        return True
