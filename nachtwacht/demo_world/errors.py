"""Why a world could not be built.

    WorldError        a child process failed or did not get ready, an install did not succeed

The demo shows the message as its one line; tests let it fail the test with the message.
"""

from __future__ import annotations

__all__ = ["WorldError"]


class WorldError(Exception):
    """A part of the world did not start or finish; the message names the part and the cause."""
