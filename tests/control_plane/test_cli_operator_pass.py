"""An operator's pass over the release commands with absurd arguments: the id of another kind of
thing, a withdrawn release, the same command twice in a row, a reason of 10,000 characters or
with controls. Each refusal is one line naming what was wrong, exit 2, and every watched table
is as it was (rows before and after)."""

from __future__ import annotations

import pytest

from tests.control_plane.test_cli import run_control
from tests.control_plane.test_cli_refusals import _filled, snapshot, world

pytestmark = pytest.mark.slow

__all__ = ["world"]  # the fixture, shared with the refusals' tests

R = ["--reason", "x"]
WITHDRAW = ["withdraw-release", "{1.2.0}", *R]
PAIR = ["--channel", "stable", "--platform", "linux-x86_64"]

# (what is done first, the command refused, how its one line begins after the command's name)
PASSES = [
    pytest.param([], ["promote", "{agent}", *R], "RELEASE_ID: '{agent}' is not the id of a release",
                 id="promote_an_agent_id"),
    pytest.param([], ["halt", "{org}", *R], "RELEASE_ID: '{org}' is not the id of a release",
                 id="halt_an_org_id"),
    pytest.param([], ["withdraw-release", "{org}", *R],
                 "RELEASE_ID: '{org}' is not the id of a release", id="withdraw_an_org_id"),
    pytest.param([], ["pin", "--org", "{agent}", "--version", "1.2.0", *R],
                 "--org: '{agent}' is not the id of an organisation", id="pin_org_an_agent_id"),
    pytest.param([], ["pin", "--agent", "{1.2.0}", "--running", *R],
                 "--agent: '{1.2.0}' is not the id of an agent", id="pin_agent_a_release_id"),
    pytest.param([], ["unpin", "--agent", "{org}"], "--agent: '{org}' has no pin",
                 id="unpin_agent_an_org_id"),
    pytest.param([], ["halt", "{1.2.0}", "--reason", "x" * 10_000],
                 "--reason: 'xxxxxxxxxx", id="halt_reason_10000"),
    pytest.param([], ["rollback", *PAIR, "--reason", "y" * 10_000], "--reason: 'yyyyyyyyyy",
                 id="rollback_reason_10000"),
    pytest.param([], ["withdraw-release", "{1.2.0}", "--reason", "a\u2066b"],
                 "--reason: 'a\\u2066b' contains the bidirectional control U+2066",
                 id="withdraw_reason_isolate"),
    pytest.param([], ["promote", "\x1b[2J", *R], "RELEASE_ID: '\\x1b[2J' is not an id",
                 id="promote_an_escape"),
    pytest.param([WITHDRAW], WITHDRAW, "release {1.2.0} (1.2.0) is already withdrawn",
                 id="withdraw_twice"),
    pytest.param([WITHDRAW], ["promote", "{1.2.0}", *R], "release {1.2.0} (1.2.0) is withdrawn",
                 id="promote_withdrawn"),
    pytest.param([WITHDRAW], ["halt", "{1.2.0}", *R], "release {1.2.0} (1.2.0) is withdrawn",
                 id="halt_withdrawn"),
    pytest.param([WITHDRAW], ["resume", "{1.2.0}", *R], "release {1.2.0} (1.2.0) is not halted",
                 id="resume_withdrawn"),
    pytest.param([WITHDRAW], ["pin", "--org", "{org}", "--version", "1.2.0", *R],
                 "--version: '1.2.0' is not the version of a published release that is not"
                 " withdrawn", id="pin_to_withdrawn"),
    pytest.param([WITHDRAW], ["brake", "engage", "--release", "{1.2.0}", *R],
                 "release {1.2.0} (1.2.0) is withdrawn", id="brake_withdrawn"),
    pytest.param([["halt", "{1.2.0}", *R]], ["halt", "{1.2.0}", *R],
                 "release {1.2.0} (1.2.0) is already halted", id="halt_twice"),
    pytest.param([], ["resume", "{1.0.0}", *R],
                 "release {1.0.0} (1.0.0) is not halted", id="resume_never_halted"),
    pytest.param([["promote", "{1.2.0}", *R]], ["promote", "{1.2.0}", *R],
                 "release {1.2.0} (1.2.0) is already at stage everyone", id="promote_twice"),
    pytest.param([["pin", "--org", "{org}", "--version", "1.0.0", *R], ["unpin", "--org", "{org}"]],
                 ["unpin", "--org", "{org}"], "--org: '{org}' has no pin", id="unpin_twice"),
]  # fmt: skip


@pytest.mark.parametrize(("first", "args", "message"), PASSES)
def test_an_absurd_release_command_is_one_line_and_changes_nothing(
    database_url: str,
    world: dict[str, str],
    first: list[list[str]],
    args: list[str],
    message: str,
) -> None:
    for before in first:
        done = run_control(*(_filled(a, world) for a in before), "--database-url", database_url)
        assert done.returncode == 0, done.stderr
    args = [_filled(arg, world) for arg in args]
    before_rows = snapshot(database_url)
    result = run_control(*args, "--database-url", database_url)
    assert result.returncode == 2, result.stdout
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert line.startswith(f"nachtwacht control {args[0]}: {_filled(message, world)}"), line
    assert snapshot(database_url) == before_rows
