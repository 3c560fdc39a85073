"""What `nachtwacht control` prints of stored text is inert on a terminal, whatever the row
holds: rows written before text was made inert where it is stored (an agent's error and versions,
a name, a reason) may hold raw escape sequences, C1 controls or bidirectional overrides. Written
here by SQL, as such a row would be, and read back by the commands as real processes."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import psycopg
import pytest

from control_plane.registry import Services
from tests.control_plane.conftest import Agent, Org
from tests.control_plane.test_cli import run_control

pytestmark = pytest.mark.slow

# An escape sequence that clears the screen, a C1 CSI, a bidirectional override, a bell, a NUL
# written as PostgreSQL can hold it (it cannot), and a carriage return that rewrites the line.
HOSTILE = "\x1b[2J\x1b]0;pwned\x07 \x9b31m \u202eevil\r"


def obeyed(text: str) -> list[str]:
    """The characters of `text` a terminal would obey rather than show."""
    return [
        c
        for c in text
        if c not in "\n"
        and (
            ord(c) < 0x20
            or 0x7F <= ord(c) <= 0x9F
            or 0x202A <= ord(c) <= 0x202E
            or 0x2066 <= ord(c) <= 0x2069
        )
    ]


@pytest.fixture
def hostile_rows(
    database_url: str,
    services: Services,
    make_org: Callable[[str], Org],
    make_agent: Callable[[Org, str], Agent],
) -> dict[str, str]:
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    with psycopg.connect(database_url) as conn:
        conn.execute("UPDATE orgs SET name = %s WHERE id = %s", ["Acme" + HOSTILE, org.org_id])
        conn.execute("UPDATE agents SET name = %s WHERE id = %s", ["web" + HOSTILE, agent.agent_id])
        conn.execute(
            "UPDATE credentials SET name = %s WHERE agent_id = %s", [HOSTILE, agent.agent_id]
        )
        conn.execute(
            "INSERT INTO events"
            " (org_id, agent_id, kind, actor_kind, actor_id, actor_name, at, data)"
            " VALUES (%s, %s, %s, 'agent', %s, %s, now(), %s)",
            [
                org.org_id,
                agent.agent_id,
                "update.failed" + HOSTILE,
                agent.agent_id,
                "web" + HOSTILE,
                json.dumps({"error": HOSTILE, "version": HOSTILE}),
            ],
        )
        conn.execute("UPDATE platform_brake SET engaged = true, reason = %s", ["stop" + HOSTILE])
    return {
        "org": str(org.org_id),
        "agent": str(agent.agent_id),
        "today": datetime.now(UTC).date().isoformat(),
    }


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["events"], id="events"),
        pytest.param(["list-credentials", "--audience", "agent"], id="list_credentials"),
        pytest.param(["brake", "show"], id="brake_show"),
        pytest.param(["delete-agent", "{agent}"], id="delete_agent"),
        pytest.param(["forecast", "--date", "{today}"], id="forecast"),
    ],
)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_stored_text_is_printed_inert(
    database_url: str, hostile_rows: dict[str, str], command: list[str], as_json: bool
) -> None:
    command = [word.format(**hostile_rows) for word in command]
    result = run_control(*command, *(["--json"] if as_json else []), "--database-url", database_url)
    assert result.returncode == 0, result.stderr
    assert obeyed(result.stdout) == [], result.stdout
    assert obeyed(result.stderr) == [], result.stderr
    # Seen, not lost: the escape is there to read.
    if command[0] != "forecast":
        assert "\\u001b" in result.stdout, result.stdout


def test_a_refusal_that_quotes_stored_text_is_printed_inert(
    database_url: str, hostile_rows: dict[str, str]
) -> None:
    """The one line of a refusal goes to the terminal through the same door."""
    result = run_control("delete-agent", "not-an-id\x1b[2J", "--database-url", database_url)
    assert result.returncode == 2, result.stderr
    assert obeyed(result.stderr.rstrip("\n")) == [], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        pytest.param(["list-credentials", "--org", "not-an-id"], "--org", id="list_org"),
        pytest.param(["list-credentials", "--agent", "\x1b[2J"], "--agent", id="list_agent"),
        pytest.param(["events", "--agent", "x"], "--agent", id="events_agent"),
    ],
)
def test_a_bad_flag_is_named_though_the_database_is_gone(flags: list[str], named: str) -> None:
    """The flags are judged before the database is reached: with no database listening, the
    operator is told about the id typed, not about the connection."""
    result = run_control(*flags, "--database-url", "postgresql://127.0.0.1:1/gone")
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1, result.stderr
    assert f": {named}: " in line and "is not an id" in line, line
    assert obeyed(line) == [], line
