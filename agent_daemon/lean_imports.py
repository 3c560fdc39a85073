"""Keep what the daemon never runs out of its memory (issue 16: idle peak RSS ≤ 40 MiB).

httpx's package imports its command-line tool (`httpx._main`) whenever `click` and `rich` happen to
be installed — on a developer's machine, or a host where another program brought them — and that
tool alone holds ~10 MiB of the daemon's memory for a lifetime of never being called. A stand-in
module takes its place before httpx is first imported; httpx's own fallback for a missing tool is
the same shape (a `main` that cannot run the tool). Nothing else of httpx changes.
"""

from __future__ import annotations

import sys
import types

__all__ = ["keep_httpx_cli_out"]


def _httpx_cli_not_installed() -> None:
    raise SystemExit("the httpx command-line tool is not available inside the nachtwacht agent")


def keep_httpx_cli_out() -> None:
    """Install the stand-in unless httpx (or its tool) is already imported: then it is too late
    to save anything, and a module already in use is never replaced."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    stand_in = types.ModuleType("httpx._main", "httpx's command-line tool, left out by nachtwacht")
    stand_in.main = _httpx_cli_not_installed  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = stand_in
