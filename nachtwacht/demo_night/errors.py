"""The demo's failures. Each is printed as one line; none reaches the user as a stack trace.

DemoError           base
├── DemoUsageError  a bad option (exit 2)
└── DemoFailed      a part did not start or answer as expected (exit 1)
"""

from __future__ import annotations

__all__ = ["DemoError", "DemoFailed", "DemoUsageError"]


class DemoError(Exception):
    """Anything that stops the demo; the message is one line for a person."""


class DemoUsageError(DemoError):
    """An option has a value the demo cannot use."""


class DemoFailed(DemoError):
    """A part of the platform did not start or answer as expected."""
