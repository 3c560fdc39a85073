"""`agent status` names the trust root held — version and expiry, or none (the key files) — and
says under "attention" when it expires within 30 days, has expired, or cannot be used."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_daemon.disk.daemon_state import DaemonState
from agent_daemon.disk.held_trust_root import HeldTrustRoot
from agent_daemon.host.status import AgentStatus, describe_trust_root, problems

NOW = datetime(2026, 11, 30, 2, 10, tzinfo=UTC)


def _status(root: HeldTrustRoot | None, error: str | None = None) -> AgentStatus:
    return AgentStatus(
        agent_id="a1",
        control_url="https://control.example",
        daemon_pid=4242,
        cached=None,
        state=DaemonState(),
        pending_reports=0,
        installed_version="1.4.1",
        now=NOW,
        trust_root=root,
        trust_root_error=error,
    )


def _root(expires_in: timedelta) -> HeldTrustRoot:
    return HeldTrustRoot(version=3, expires=NOW + expires_in, release_keys={}, body=b"")


@pytest.mark.parametrize(
    ("expires_in", "words", "attention"),
    [
        pytest.param(timedelta(days=88), "v3, expires 2027-02-26 02:10 UTC (in 88 days)", None,
                     id="months_ahead"),
        pytest.param(timedelta(days=31), "(in 31 days)", None, id="just_outside_the_warning"),
        pytest.param(timedelta(days=10), "(in 10 days)",
                     "the trust root v3 expires at 2026-12-10 02:10 UTC (in 10 days)",
                     id="within_thirty_days"),
        pytest.param(timedelta(hours=5), "(in 5 h 0 min)", "expires at", id="hours_left"),
        pytest.param(-timedelta(hours=3), "v3, EXPIRED at 2026-11-29 23:10 UTC (3 hours ago)",
                     "the trust root v3 expired at 2026-11-29 23:10 UTC: no release is accepted",
                     id="expired"),
    ],
)  # fmt: skip
def test_the_root_held_and_its_expiry_are_named(
    expires_in: timedelta, words: str, attention: str | None
) -> None:
    status = _status(_root(expires_in))
    assert words in describe_trust_root(status)
    found = [line for line in problems(status) if "trust root" in line]
    if attention is None:
        assert found == []
    else:
        assert len(found) == 1 and attention in found[0]


def test_a_host_on_key_files_holds_none() -> None:
    status = _status(None)
    assert describe_trust_root(status) == "none (trusted-key files)"
    assert problems(status) == []


def test_an_unusable_root_file_is_named_and_needs_attention() -> None:
    status = _status(None, error="trust_root.json: mode 0666")
    assert describe_trust_root(status) == "unusable (trust_root.json: mode 0666)"
    [line] = problems(status)
    assert "the held trust root is unusable" in line and "no release is accepted" in line
