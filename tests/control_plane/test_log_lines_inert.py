"""The control plane's log lines on stderr are inert: a line that quotes stored text (an actor's
name from before names were refused with a control character, an agent's error from before text
was made inert where it is stored) shows each escape sequence, it does not play it."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from control_plane import server
from control_plane.events.trail import Actor, _log_action

HOSTILE = "\x1b[2J\x9b31m\u202eevil\r"


@pytest.fixture
def logs_shown() -> Iterator[io.StringIO]:
    """`serve`'s log handlers, set up as it does, writing to a text of the test's instead of
    stderr, taken away again after the test."""
    loggers = [logging.getLogger("control_plane.trail"), logging.getLogger("control_plane")]
    before = [(logger.handlers[:], logger.propagate, logger.level) for logger in loggers]
    for logger in loggers:
        logger.handlers.clear()
    server._show_the_logs()
    err = io.StringIO()
    for logger in loggers:
        for handler in logger.handlers:
            assert isinstance(handler, logging.StreamHandler)
            handler.setStream(err)
    yield err
    for logger, (handlers, propagate, level) in zip(loggers, before, strict=True):
        logger.handlers[:] = handlers
        logger.propagate = propagate
        logger.setLevel(level)


def test_a_trail_line_naming_a_hostile_actor_is_inert(
    logs_shown: io.StringIO,
) -> None:
    _log_action(
        "agent.renamed" + HOSTILE,
        Actor(kind="operator", name="ops" + HOSTILE),
        None,
        None,
        {"error": HOSTILE},
    )
    err = logs_shown.getvalue()
    assert err.count("nachtwacht trail:") == 1, err
    line = err.removesuffix("\n")
    assert "\n" not in line
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in line), err
    assert "ops\\u001b[2J\\u009b31m\\u202eevil\\u000d" in line


def test_a_warning_quoting_stored_text_is_inert(
    logs_shown: io.StringIO,
) -> None:
    logging.getLogger("control_plane.reconcile.worker").warning("pass failed: %s", HOSTILE)
    logging.getLogger("control_plane.reconcile.worker").info("not shown: %s", HOSTILE)
    err = logs_shown.getvalue()
    assert err == "pass failed: \\u001b[2J\\u009b31m\\u202eevil\\u000d\n"
