"""Every `nachtwacht control` command that takes an operator's input, fed hostile and absurd values
as real processes on a real database: the refusal is one line naming the flag as it was typed
(`--wave`, `--label`, `RELEASE_ID`), the value and what was expected — never the HTTP API's field
(`wave`, `name`, `release_id`) — exit 2, no stack trace, and nothing in the database changed."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.registry import Services
from tests.conftest import child_environment, nachtwacht_command
from tests.control_plane.conftest import Agent, Org, sign_release
from tests.control_plane.test_cli import run_control
from tests.worlds.clocks import ManualClock
from tests.worlds.rows import rows_at

pytestmark = pytest.mark.slow

# Every table an admin command writes; a refused command leaves each as it was.
WATCHED = (
    "orgs",
    "agents",
    "credentials",
    "enrollment_tokens",
    "pins",
    "release_halts",
    "releases",
    "current_releases",
    "platform_brake",
    "platform_settings",
    "tokens",
    "trust_roots",
    "events",
)


def snapshot(database_url: str) -> dict[str, list[str]]:
    return rows_at(database_url, WATCHED)


@pytest.fixture
def world(
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    make_org: Callable[[str], Org],
    make_agent: Callable[[Org, str], Agent],
    tmp_path: Path,
) -> dict[str, str]:
    """1.0.0 at `everyone`, 1.2.0 after it in wave 1, one organisation with one agent `web-01`,
    the release key's public half, a signed 1.3.0 beside a build that is not the signed one, and
    a file that is not a trust root."""
    ids = {}
    for version, manifest_version in (("1.0.0", 10), ("1.2.0", 12)):
        signed = sign_release(release_key, version=version, manifest_version=manifest_version)
        published = services.releases.publish(
            signed.manifest, signed.signature, signed.artifact, now=clock.now()
        )
        ids[version] = str(published.id)
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    public = tmp_path / "release.pub"
    public.write_bytes(
        release_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    newer = sign_release(release_key, version="1.3.0", manifest_version=13)
    (tmp_path / "manifest.json").write_bytes(newer.manifest)
    (tmp_path / "manifest.sig").write_bytes(newer.signature)
    (tmp_path / "other.tar.gz").write_bytes(newer.artifact + b"tampered")
    (tmp_path / "root.json").write_text(json.dumps({"signed": "nothing"}))
    # The wrong file given as the build: a disk image, say (sparse here: no disk, no memory).
    with (tmp_path / "disk.img").open("wb") as image:
        image.truncate(64 * 1024 * 1024)
    return {
        **ids,
        "org": org.org_id,
        "agent": agent.agent_id,
        "dir": str(tmp_path),
        "public": str(public),
    }


UNKNOWN = str(uuid.UUID(int=7))
PAIR = ["--channel", "stable", "--platform", "linux-x86_64"]
REFUSED = [
    # promote, halt, resume: RELEASE_ID, --wave, --reason
    pytest.param(
        ["promote", "{1.2.0}", "--reason", "x", "--wave", "1"],
        "--wave: 1 is not a later wave: the release is in wave 1 of 4 (expected 2 to 4)",
        id="promote_wave_its_own",
    ),
    pytest.param(
        ["promote", "{1.2.0}", "--reason", "x", "--wave", "-3"],
        "--wave: -3 is not a later wave",
        id="promote_wave_negative",
    ),
    pytest.param(
        ["promote", "{1.2.0}", "--reason", "x", "--wave", "99999999999999999999"],
        "--wave: 99999999999999999999 is not a later wave",
        id="promote_wave_huge",
    ),
    pytest.param(
        ["promote", UNKNOWN, "--reason", "x"],
        f"RELEASE_ID: '{UNKNOWN}' is not the id of a release",
        id="promote_unknown_release",
    ),
    pytest.param(
        ["promote", "", "--reason", "x"],
        "RELEASE_ID: '' is not an id (expected a UUID)",
        id="promote_empty_release",
    ),
    pytest.param(
        ["promote", "{1.2.0}", "--reason", ""],
        "--reason: '' is required to promote a release",
        id="promote_empty_reason",
    ),
    pytest.param(
        ["halt", UNKNOWN, "--reason", "x"],
        f"RELEASE_ID: '{UNKNOWN}' is not the id of a release",
        id="halt_unknown_release",
    ),
    pytest.param(
        ["resume", "{1.2.0}", "--reason", "  "],
        "--reason: '  ' is required",
        id="resume_blank_reason",
    ),
    # pin, unpin: --org, --agent, --version, --reason
    pytest.param(
        ["pin", "--org", "{org}", "--version", "9.9.9"],
        "--version: '9.9.9' is not the version of a published release that is not withdrawn",
        id="pin_version_unknown",
    ),
    pytest.param(
        ["pin", "--org", "{org}", "--version", ""],
        "--version: '' is not the version of a published release",
        id="pin_version_empty",
    ),
    pytest.param(
        ["pin", "--org", "{org}", "--version", "V1.0.0"],
        "--version: 'V1.0.0' is not the version of a published release",
        id="pin_version_wrong_case",
    ),
    pytest.param(
        ["pin", "--org", "{org}", "--version", "1.0.0", "--reason", "r" * 600],
        "--reason: 'rrrr",
        id="pin_reason_huge",
    ),
    pytest.param(
        ["pin", "--org", UNKNOWN, "--version", "1.0.0"],
        f"--org: '{UNKNOWN}' is not the id of an organisation",
        id="pin_org_unknown",
    ),
    pytest.param(
        ["pin", "--agent", UNKNOWN, "--running"],
        f"--agent: '{UNKNOWN}' is not the id of an agent",
        id="pin_agent_unknown",
    ),
    pytest.param(
        ["pin", "--agent", "not-an-id", "--running"],
        "--agent: 'not-an-id' is not an id (expected a UUID)",
        id="pin_agent_malformed",
    ),
    pytest.param(["unpin", "--org", "{org}"], "--org: '{org}' has no pin", id="unpin_not_pinned"),
    # brake: --release, --reason
    pytest.param(
        ["brake", "engage", "--release", UNKNOWN, "--reason", "x"],
        f"--release: '{UNKNOWN}' is not the id of a release",
        id="brake_release_unknown",
    ),
    pytest.param(
        ["brake", "engage", "--release", "{1.2.0}", "--reason", " "],
        "--reason: ' ' is required to engage a release's brake",
        id="brake_release_blank_reason",
    ),
    # withdraw-release: RELEASE_ID, --reason, --replacement
    pytest.param(
        ["withdraw-release", "{1.2.0}", "--reason", "x", "--replacement", "9.9.9"],
        "--replacement: '9.9.9' is not a release of stable/linux-x86_64",
        id="withdraw_replacement_unknown",
    ),
    pytest.param(
        ["withdraw-release", UNKNOWN, "--reason", "x"],
        f"RELEASE_ID: '{UNKNOWN}' is not the id of a release",
        id="withdraw_unknown_release",
    ),
    pytest.param(
        ["withdraw-release", "{1.2.0}", "--reason", ""],
        "--reason: '' is required to withdraw a release",
        id="withdraw_empty_reason",
    ),
    # rollback: --channel, --platform, --to, --reason
    pytest.param(
        ["rollback", "--channel", "STABLE", "--platform", "linux-x86_64", "--reason", "x"],
        "--channel: 'STABLE' is not a name",
        id="rollback_channel_wrong_case",
    ),
    pytest.param(
        ["rollback", "--channel", "stable", "--platform", "", "--reason", "x"],
        "--platform: '' is not a name",
        id="rollback_platform_empty",
    ),
    pytest.param(
        ["rollback", *PAIR, "--reason", "x", "--to", ""],
        "--to: '' is not a version (expected e.g. 1.5.0)",
        id="rollback_to_empty",
    ),
    pytest.param(
        ["rollback", *PAIR, "--reason", "x", "--to", "9.9.9"],
        "--to: '9.9.9' is not older than 1.2.0",
        id="rollback_to_newer",
    ),
    pytest.param(
        ["rollback", *PAIR, "--reason", "x", "--to", "0.0.1"],
        "--to: '0.0.1' is not the version of a release of stable/linux-x86_64",
        id="rollback_to_unknown",
    ),
    pytest.param(
        ["rollback", *PAIR, "--reason", " ", "--to", "1.0.0"],
        "--reason: ' ' is required to roll back",
        id="rollback_blank_reason",
    ),
    # a reason a person types: no bidirectional control, no control character
    pytest.param(
        ["halt", "{1.2.0}", "--reason", "disk full\u202e on the canaries"],
        "--reason: 'disk full\\u202e on the canaries' contains the bidirectional control U+202E",
        id="halt_reason_right_to_left_override",
    ),
    pytest.param(
        ["brake", "engage", "--reason", "bad build\u2066"],
        "--reason: 'bad build\\u2066' contains the bidirectional control U+2066",
        id="brake_reason_isolate",
    ),
    pytest.param(
        ["pin", "--org", "{org}", "--version", "1.0.0", "--reason", "audit\x1b[2J"],
        "--reason: 'audit\\x1b[2J' contains the control character U+001B",
        id="pin_reason_escape",
    ),
    pytest.param(
        ["rollback", *PAIR, "--reason", "\u202eback", "--to", "1.0.0"],
        "--reason: '\\u202eback' contains the bidirectional control U+202E",
        id="rollback_reason_override",
    ),
    # the accounts: NAME, --org, --name and its alias --label
    pytest.param(["create-org", ""], "NAME: '' must be a non-empty name", id="org_name_empty"),
    pytest.param(["create-org", "n" * 300], "NAME: 'nnnn", id="org_name_huge"),
    pytest.param(
        ["create-org", "acme\x1b[2J"],
        "NAME: 'acme\\x1b[2J' contains the control character U+001B (plain text)",
        id="org_name_escape",
    ),
    pytest.param(
        ["create-org", "acme\u202egnp.exe"],
        "NAME: 'acme\\u202egnp.exe' contains the bidirectional control U+202E",
        id="org_name_right_to_left_override",
    ),
    pytest.param(
        ["enroll-agent", "--org", "{org}", "--name", "web-01\u2067"],
        "--name: 'web-01\\u2067' contains the bidirectional control U+2067",
        id="agent_name_isolate",
    ),
    pytest.param(
        ["create-panel-key", "--org", "{org}", "--label", "ops\x07"],
        "--label: 'ops\\x07' contains the control character U+0007",
        id="panel_key_label_bell",
    ),
    pytest.param(
        ["create-panel-key", "--org", UNKNOWN],
        f"--org: '{UNKNOWN}' is not the id of an organisation",
        id="panel_key_org_unknown",
    ),
    pytest.param(
        ["create-panel-key", "--org", "{org}", "--label", "l" * 300],
        "--label: 'llll",
        id="panel_key_label_huge",
    ),
    pytest.param(
        ["enroll-agent", "--org", "{org}", "--name", ""],
        "--name: '' must be a non-empty name",
        id="agent_name_empty",
    ),
    pytest.param(
        ["enroll-agent", "--org", "{org}", "--name", "web\x9b2J"],
        "--name: 'web\\x9b2J' contains the control character U+009B",
        id="agent_name_csi",
    ),
    pytest.param(
        ["enroll-agent", "--org", "{org}", "--name", "web-01"],
        "--name: 'web-01' is already an agent of organisation",
        id="agent_name_taken",
    ),
    pytest.param(
        ["enroll-agent", "--org", UNKNOWN, "--name", "web-02"],
        f"--org: '{UNKNOWN}' is not the id of an organisation",
        id="agent_org_unknown",
    ),
    pytest.param(
        ["create-operator-key", "--name", "x" * 300],
        "--name: 'xxxx",
        id="operator_key_name_huge",
    ),
    # credentials and the trail: ID, --kind
    pytest.param(
        ["revoke-credential", UNKNOWN],
        f"ID: '{UNKNOWN}' is not the id of a credential",
        id="revoke_unknown_credential",
    ),
    pytest.param(
        ["rotate-credential", UNKNOWN],
        f"ID: '{UNKNOWN}' is not the id of a credential",
        id="rotate_unknown_credential",
    ),
    pytest.param(
        ["delete-agent", UNKNOWN],
        f"ID: '{UNKNOWN}' is not the id of an agent",
        id="delete_unknown_agent",
    ),
    pytest.param(["events", "--kind", "k" * 300], "--kind: 'kkkk", id="events_kind_huge"),
    pytest.param(
        ["events", "--kind", ""],
        "--kind: '' is blank (expected an event kind",
        id="events_kind_empty",
    ),
    pytest.param(["events", "--kind", " "], "--kind: ' ' is blank", id="events_kind_blank"),
    pytest.param(
        ["forecast", "--date", "2026-02-30"],
        "--date: '2026-02-30' is not a date (expected YYYY-MM-DD",
        id="forecast_date_absurd",
    ),
    # enrollment tokens: --org, --uses, ID
    pytest.param(
        ["enrollment-token", "create", "--org", UNKNOWN],
        f"--org: '{UNKNOWN}' is not the id of an organisation",
        id="token_org_unknown",
    ),
    pytest.param(
        ["enrollment-token", "create", "--org", "{org}", "--uses", "-1"],
        "--uses: -1 is outside 1 to 10000",
        id="token_uses_negative",
    ),
    pytest.param(
        ["enrollment-token", "revoke", UNKNOWN],
        f"ID: '{UNKNOWN}' is not the id of an enrollment token",
        id="token_unknown",
    ),
    # files: FILE, ARTIFACT
    pytest.param(
        ["trust-root", "publish", "{dir}/root.json"], "FILE: ", id="trust_root_not_a_root"
    ),
    pytest.param(
        [
            "publish-release",
            "{dir}/manifest.json",
            "{dir}/manifest.sig",
            "{dir}/other.tar.gz",
            "--release-public-key",
            "{public}",
        ],
        "ARTIFACT: '",
        id="publish_another_build",
    ),
    pytest.param(
        [
            "publish-release",
            "{dir}/manifest.json",
            "{dir}/manifest.sig",
            "{dir}/disk.img",
            "--release-public-key",
            "{public}",
        ],
        "ARTIFACT: '{dir}/disk.img' is larger than the manifest's length of ",
        id="publish_a_file_far_larger_than_the_build",
    ),
    # the server's own commands: --revision, --catch-up-minutes
    pytest.param(
        ["migrate", "--revision", "bogus"],
        "--revision: 'bogus' is not a revision of this release (expected head or a revision id",
        id="migrate_revision_unknown",
    ),
    pytest.param(
        ["migrate", "--revision", ""],
        "--revision: '' is not a revision of this release",
        id="migrate_revision_empty",
    ),
    pytest.param(
        ["serve", "--port", "0", "--catch-up-minutes", "999"],
        "--catch-up-minutes: 999 is out of range (expected between 1 and 120)",
        id="serve_catch_up_absurd",
    ),
]


def _filled(text: str, world: dict[str, str]) -> str:
    """`{name}` in an argument or a message stands for the world's value of that name."""
    for name, value in world.items():
        text = text.replace(f"{{{name}}}", value)
    return text


@pytest.mark.parametrize(("args", "message"), REFUSED)
def test_a_refusal_names_the_flag_as_typed_and_changes_nothing(
    database_url: str, world: dict[str, str], args: list[str], message: str
) -> None:
    args = [_filled(arg, world) for arg in args]
    before = snapshot(database_url)
    result = run_control(*args, "--database-url", database_url)
    assert result.returncode == 2, result.stdout
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    # The command as typed, with its action where it has some (`enrollment-token create`).
    command = " ".join(args[:2] if args[0] in {"enrollment-token", "trust-root"} else args[:1])
    assert line.startswith(f"nachtwacht control {command}: "), line
    said = line.removeprefix(f"nachtwacht control {command}: ")
    # The flag comes first, as the operator typed it, never the API's field name.
    assert said.startswith(_filled(message, world)), line
    assert snapshot(database_url) == before


def test_a_setting_serve_read_from_its_variable_names_the_variable(
    database_url: str,
) -> None:
    before = snapshot(database_url)
    result = run_control(
        "serve", "--port", "0", "--database-url", database_url,
        env={"NACHTWACHT_CATCH_UP_MINUTES": "0"},
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "nachtwacht control serve: NACHTWACHT_CATCH_UP_MINUTES: 0 is out of range "
        "(expected between 1 and 120)"
    )
    assert snapshot(database_url) == before


def test_a_rollback_with_nothing_to_go_back_to_names_the_to_flag(
    database_url: str, services: Services, release_key: Ed25519PrivateKey, clock: ManualClock
) -> None:
    """Without `--to`, when no older release qualifies (1.0.0 is withdrawn), the refusal asks
    for the flag to give, `--to`, not the API's field `(to)`."""
    ids = {}
    for version, manifest_version in (("1.0.0", 10), ("1.2.0", 12)):
        signed = sign_release(
            release_key, version=version, manifest_version=manifest_version, channel="edge"
        )
        ids[version] = services.releases.publish(
            signed.manifest, signed.signature, signed.artifact, now=clock.now()
        ).id
    services.releases.withdraw(ids["1.0.0"], reason="bad", now=clock.now())
    before = snapshot(database_url)
    result = run_control(
        "rollback", "--channel", "edge", "--platform", "linux-x86_64", "--reason", "x",
        "--database-url", database_url,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout
    assert result.stderr.strip() == (
        "nachtwacht control rollback: edge/linux-x86_64 has no release older than 1.2.0 that is"
        " neither withdrawn nor halted: name the version to go back to (--to)"
    )
    assert snapshot(database_url) == before


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("not a url", id="words"),
        pytest.param("postgresql://nachtwacht:s3cret@%zz/db", id="bad_percent_escape"),
        pytest.param("postgresql://nachtwacht:s3cret@[::1/db", id="unclosed_ipv6"),
        pytest.param("host=db password='s3cret", id="unterminated_quote"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [["after-restore"], ["migrate"], ["trust-root", "list"], ["serve", "--port", "0"]],
    ids=["after_restore", "migrate", "trust_root_list", "serve"],
)
def test_a_database_url_that_is_none_is_refused_naming_the_flag_or_variable(
    database_url: str, url: str, command: list[str]
) -> None:
    """A mistyped URL (the flag, or the variable a unit file sets) is the operator's input: one
    line naming where it came from and what was expected, exit 2, and its password not echoed."""
    before = snapshot(database_url)
    typed = command[:2] if command[0] == "trust-root" else command[:1]
    prefix = f"nachtwacht control {' '.join(typed)}: "
    for given, named in (
        ({"args": ["--database-url", url]}, "--database-url"),
        ({"env": {"NACHTWACHT_DATABASE_URL": url}}, "NACHTWACHT_DATABASE_URL"),
    ):
        result = run_control(*command, *given.get("args", []), env=given.get("env"))
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        line = result.stderr.strip()
        assert len(line.splitlines()) == 1, result.stderr
        assert line.startswith(f"{prefix}{named}: is not a PostgreSQL connection string"), line
        assert "expected" in line, line
        assert "s3cret" not in line, line
    assert snapshot(database_url) == before


@pytest.mark.parametrize("blank", ["", "   "], ids=["empty", "spaces"])
def test_an_empty_data_dir_is_refused_not_taken_for_the_current_directory(
    tmp_path: Path, blank: str
) -> None:
    """`--data-dir "$NACHTWACHT_DATA_DIR"` with the variable unset: the command must not start a
    new, empty embedded database in the directory it was run from and act on that."""
    result = subprocess.run(
        nachtwacht_command("control", "create-org", "Acme", "--data-dir", blank),
        env=child_environment(None),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout
    assert result.stderr.strip() == (
        "nachtwacht control create-org: --data-dir: is empty (expected the embedded PostgreSQL's"
        " directory, e.g. /var/lib/nachtwacht-control-plane/postgres)"
    )
    assert list(tmp_path.iterdir()) == []
