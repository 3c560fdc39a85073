"""`nachtwacht control pin|unpin|promote|halt|resume|brake` as real processes on a real database:
each does what the API's operator route does (the same event and data), names the command line
as its actor, and refuses bad input with one line, exit 2 and nothing changed."""

from __future__ import annotations

import getpass
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.registry import Services
from tests.control_plane.conftest import Agent, Api, Org, sign_release
from tests.control_plane.test_cli import run_control
from tests.worlds.clocks import ManualClock
from tests.worlds.rows import rows_at

pytestmark = pytest.mark.slow

CLI_ACTOR = f"cli:{getpass.getuser()}"
# What an action may change; a refused command must leave every one of them as it was.
WATCHED = ("pins", "release_halts", "releases", "platform_brake", "tokens", "events")


def snapshot(database_url: str) -> dict[str, list[str]]:
    return rows_at(database_url, WATCHED)


def last_event(database_url: str, *, release_id: str | None = None) -> dict[str, Any]:
    """The newest event (the command line's clock is ahead of the test's), or the one about a
    release."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT kind, actor_kind, actor_id, actor_name, org_id, agent_id, data FROM events"
            " WHERE %(release)s::text IS NULL OR data->>'release_id' = %(release)s::text"
            " ORDER BY at DESC, id DESC LIMIT 1",
            {"release": release_id},
        ).fetchone()
    assert row is not None
    names = ("kind", "actor_kind", "actor_id", "actor_name", "org_id", "agent_id", "data")
    return dict(zip(names, row, strict=True))


def control(database_url: str, *args: str) -> dict[str, Any]:
    result = run_control(*args, "--json", "--database-url", database_url)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.fixture
def world(
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    make_org: Callable[[str], Org],
    make_agent: Callable[[Org, str], Agent],
) -> dict[str, str]:
    """1.0.0 at `everyone`, 1.2.0 after it in its canary stage, one organisation, one agent."""
    ids = {}
    for version, manifest_version in (("1.0.0", 10), ("1.2.0", 12)):
        signed = sign_release(release_key, version=version, manifest_version=manifest_version)
        published = services.releases.publish(
            signed.manifest, signed.signature, signed.artifact, now=clock.now()
        )
        ids[version] = str(published.id)
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    return {**ids, "org": org.org_id, "agent": agent.agent_id}


def test_pin_and_unpin_an_organisation_are_on_the_trail_as_the_command_line(
    database_url: str, world: dict[str, str]
) -> None:
    pinned = control(
        database_url,
        "pin",
        "--org",
        world["org"],
        "--version",
        "1.0.0",
        "--reason",
        "change freeze",
    )
    assert (pinned["org_id"], pinned["version"], pinned["reason"]) == (
        world["org"],
        "1.0.0",
        "change freeze",
    )
    assert pinned["set_by"] == CLI_ACTOR
    event = last_event(database_url)
    assert event["kind"] == "pin.set"
    assert (event["actor_kind"], event["actor_id"], event["actor_name"]) == (
        "operator",
        None,
        CLI_ACTOR,
    )
    assert str(event["org_id"]) == world["org"]
    assert event["data"] == {"scope": "org", "version": "1.0.0", "reason": "change freeze"}

    assert control(database_url, "unpin", "--org", world["org"]) == {
        "org_id": world["org"],
        "pinned": False,
    }
    removed = last_event(database_url)
    assert (removed["kind"], removed["actor_name"]) == ("pin.removed", CLI_ACTOR)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM pins").fetchone() == (0,)


def test_pin_an_agent_at_the_version_it_runs(database_url: str, world: dict[str, str]) -> None:
    pinned = control(database_url, "pin", "--agent", world["agent"], "--running")
    assert (pinned["agent_id"], pinned["version"]) == (world["agent"], None)
    assert last_event(database_url)["data"] == {"scope": "agent", "version": None, "reason": None}


def test_promote_halt_resume_and_the_release_brake(
    database_url: str, world: dict[str, str]
) -> None:
    release = world["1.2.0"]
    halted = control(database_url, "halt", release, "--reason", "canaries fill the disk")
    assert (halted["release_id"], halted["cause"], halted["reason"]) == (
        release,
        "operator",
        "canaries fill the disk",
    )
    assert halted["halted_by"] == CLI_ACTOR
    assert last_event(database_url)["kind"] == "release.halted"

    refused = run_control(
        "promote", release, "--reason", "looks fine", "--database-url", database_url
    )
    assert refused.returncode == 2
    assert "is withdrawn or halted: resume it before promoting it" in refused.stderr

    resumed = control(database_url, "resume", release, "--reason", "fixed on the hosts")
    assert resumed["resume_reason"] == "fixed on the hosts"
    assert resumed["resumed_by"] == CLI_ACTOR
    moved = control(database_url, "promote", release, "--reason", "next wave", "--wave", "2")
    assert (moved["stage"], moved["wave"], moved["waves"]) == ("canary", 2, 4)
    assert last_event(database_url)["data"]["wave"] == 2
    promoted = control(database_url, "promote", release, "--reason", "soaked by hand")
    assert (promoted["stage"], promoted["version"]) == ("everyone", "1.2.0")
    event = last_event(database_url)
    assert (event["kind"], event["actor_name"]) == ("release.promoted", CLI_ACTOR)
    assert event["data"]["reason"] == "soaked by hand"

    braked = control(database_url, "brake", "engage", "--release", release, "--reason", "bad")
    assert (braked["engaged"], braked["version"], braked["reason"]) == (True, "1.2.0", "bad")
    assert last_event(database_url)["data"]["scope"] == "release"
    loose = control(database_url, "brake", "release", "--release", release)
    assert (loose["engaged"], loose["reason"]) == (False, None)
    with psycopg.connect(database_url) as conn:
        assert conn.execute(
            "SELECT braked_at, stage FROM releases WHERE id = %s", [release]
        ).fetchone() == (None, "everyone")


def test_the_platform_brake_engages_releases_and_shows(
    database_url: str, world: dict[str, str]
) -> None:
    del world
    engaged = control(database_url, "brake", "engage", "--reason", "bad night")
    assert (engaged["engaged"], engaged["reason"], engaged["revoked_tokens"]) == (
        True,
        "bad night",
        0,
    )
    event = last_event(database_url)
    assert (event["kind"], event["actor_name"], event["data"]) == (
        "brake.engaged",
        CLI_ACTOR,
        {"reason": "bad night", "revoked_tokens": 0},
    )
    shown = control(database_url, "brake", "show")
    assert (shown["engaged"], shown["reason"]) == (True, "bad night")
    released = control(database_url, "brake", "release")
    assert (released["engaged"], released["reason"]) == (False, None)
    assert last_event(database_url)["kind"] == "brake.released"


def said(database_url: str, *args: str) -> str:
    """The one line a command prints without `--json`."""
    result = run_control(*args, "--database-url", database_url)
    assert result.returncode == 0, result.stderr
    return result.stdout.rstrip("\n")


def test_halt_resume_and_the_brakes_say_what_they_did(
    database_url: str, world: dict[str, str]
) -> None:
    release = world["1.2.0"]
    assert said(database_url, "halt", release, "--reason", "disk") == (
        f"halted release {release}: claims of it are refused until it is resumed; "
        "0 outstanding token(s) revoked"
    )
    assert said(database_url, "resume", release, "--reason", "fixed") == (
        f"resumed release {release}: claims of it are granted"
    )
    named = re.escape("the brake of 1.2.0 (") + r"[^/]+/[^)]+\)"
    engaged = said(database_url, "brake", "engage", "--release", release, "--reason", "bad")
    assert re.fullmatch(
        named + re.escape(" is engaged (bad); 0 outstanding token(s) revoked"), engaged
    )
    loose = said(database_url, "brake", "release", "--release", release)
    assert re.fullmatch(named + " is released", loose)
    assert said(database_url, "brake", "engage", "--reason", "bad night") == (
        "the platform's brake is engaged (bad night); 0 outstanding token(s) revoked"
    )
    assert said(database_url, "brake", "release") == "the platform's brake is released"


def test_the_command_line_writes_the_event_the_api_writes(
    api: Api, operator_key: str, database_url: str, world: dict[str, str]
) -> None:
    """One halt through the API, one through the command line: the same event and data but for
    the actor (and the instant each read)."""
    with api.client(operator_key) as client:
        answer = client.post(
            f"/v1/admin/releases/{world['1.2.0']}/halt", json={"reason": "same words"}
        )
    assert answer.status_code == 200, answer.text
    by_api = last_event(database_url, release_id=world["1.2.0"])
    control(database_url, "halt", world["1.0.0"], "--reason", "same words")
    by_cli = last_event(database_url, release_id=world["1.0.0"])

    def without_release(data: dict[str, Any]) -> dict[str, Any]:
        return {
            k: v for k, v in data.items() if k not in {"release_id", "version", "manifest_version"}
        }

    assert by_cli["kind"] == by_api["kind"] == "release.halted"
    assert set(by_cli["data"]) == set(by_api["data"])
    assert without_release(by_cli["data"]) == without_release(by_api["data"])
    assert by_api["actor_kind"] == by_cli["actor_kind"] == "operator"
    assert by_api["actor_id"] is not None and by_cli["actor_id"] is None
    assert (by_api["actor_name"], by_cli["actor_name"]) == ("tests", CLI_ACTOR)


UNKNOWN = str(uuid.UUID(int=7))
HOSTILE = [
    pytest.param(
        ["halt", "{1.2.0}"], "the following arguments are required: --reason", id="halt_no_reason"
    ),
    pytest.param(
        ["promote", "{1.2.0}", "--reason", "   "],
        "--reason: '   ' is required to promote a release",
        id="promote_blank_reason",
    ),
    pytest.param(
        ["resume", "{1.2.0}", "--reason", "not halted"],
        "is not halted",
        id="resume_not_halted",
    ),
    pytest.param(
        ["halt", "1.2.0", "--reason", "x"],
        "RELEASE_ID: '1.2.0' is not an id (expected a UUID)",
        id="halt_version_not_id",
    ),
    pytest.param(
        ["halt", "{1.2.0}", "--reason", "x" * 10_000],
        "--reason: 'xxxx",
        id="halt_reason_absurdly_long",
    ),
    pytest.param(
        ["promote", "{1.0.0}", "--reason", "again"],
        "is already at stage everyone",
        id="promote_everyone",
    ),
    pytest.param(
        ["promote", "{1.2.0}", "--reason", "back", "--wave", "1"],
        "--wave: 1 is not a later wave: the release is in wave 1 of 4 (expected 2 to 4)",
        id="promote_to_its_own_wave",
    ),
    pytest.param(
        ["promote", "{1.2.0}", "--reason", "far", "--wave", "99"],
        "--wave: 99 is not a later wave",
        id="promote_past_the_plan",
    ),
    pytest.param(
        ["promote", "{1.2.0}", "--reason", "x", "--wave", "two"],
        "argument --wave: 'two' is not a whole number",
        id="promote_wave_not_a_number",
    ),
    pytest.param(
        ["pin", "--org", "{org}", "--agent", "{agent}", "--version", "1.0.0"],
        "argument --agent: not allowed with argument --org",
        id="pin_two_scopes",
    ),
    pytest.param(
        ["pin", "--org", "{org}"],
        "one of the arguments --version --running is required",
        id="pin_no_version",
    ),
    pytest.param(
        ["pin", "--org", "{org}", "--version", "v" * 5000],
        "--version: 'vvvv",
        id="pin_version_absurdly_long",
    ),
    pytest.param(["brake", "engage"], "brake engage: --reason is required", id="brake_no_reason"),
    pytest.param(
        ["brake", "engage", "--release", "{1.2.0}"],
        "brake engage: --reason is required",
        id="release_brake_no_reason",
    ),
    pytest.param(
        ["brake", "engage", "--release", "{1.2.0}", "--reason", "bad", "--keep-outstanding"],
        "--keep-outstanding: only the platform's brake can keep outstanding tokens",
        id="release_brake_keep_outstanding",
    ),
    pytest.param(
        ["brake", "release", "--reason", "all good"],
        "--reason: 'all good' is only taken by `brake engage`",
        id="brake_release_with_reason",
    ),
    pytest.param(
        ["brake", "show", "--release", "{1.2.0}"],
        "brake show: takes no --release, --reason or --keep-outstanding",
        id="brake_show_with_flags",
    ),
    pytest.param(["brake", "stomp"], "invalid choice: 'stomp'", id="brake_unknown_action"),
]


@pytest.mark.parametrize(("args", "message"), HOSTILE)
def test_hostile_input_is_one_line_exit_2_and_changes_nothing(
    database_url: str, world: dict[str, str], args: list[str], message: str
) -> None:
    # `{name}` stands for the world's id of that name, known only once the world is built.
    args = [world[arg[1:-1]] if arg.startswith("{") else arg for arg in args]
    before = snapshot(database_url)
    result = run_control(*args, "--database-url", database_url)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert snapshot(database_url) == before
