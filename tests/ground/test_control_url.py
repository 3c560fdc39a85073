"""The control URL's rule is tested through the agent's flags and config
(tests/agent_daemon/commands, tests/agent_daemon/test_settings*) and the control plane's install
line (tests/control_plane/test_cli_enrollment.py); here, what a refusal may quote of it."""

from __future__ import annotations

import pytest

from ground.control_url import password_hidden


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("https://ops:hunter2@cp.example", "https://ops:***@cp.example"),
        ("https://ops:hunter2:more@cp.example:8443/x", "https://ops:***@cp.example:8443/x"),
        # The host is after the last `@` of the authority: everything before it is the login.
        ("https://ops:a@b:hunter2@cp.example/x?q#f", "https://ops:***@cp.example/x?q#f"),
        ("https://ops@cp.example", "https://ops@cp.example"),
        ("https://cp.example/a:b@c", "https://cp.example/a:b@c"),
        ("ftp://cp.example", "ftp://cp.example"),
        ("cp.example", "cp.example"),
    ],
)
def test_a_password_in_a_typed_url_is_never_quoted(typed: str, shown: str) -> None:
    assert password_hidden(typed) == shown
    assert "hunter2" not in password_hidden(typed)
