"""`nachtwacht control …` as real processes: serve, the admin commands, bad input."""

from __future__ import annotations

import hashlib
import json
import signal
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import REPO_ROOT, RunningControlPlane, child_environment, nachtwacht_command

pytestmark = pytest.mark.slow


def run_control(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        nachtwacht_command("control", *args),
        env=child_environment(env),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def data_dir(embedded_data_dir: Path) -> Path:
    return embedded_data_dir


def test_serve_on_a_data_dir_runs_everything_and_stops_its_postgres_on_sigterm(
    control_plane_server: Callable[..., RunningControlPlane], data_dir: Path
) -> None:
    server = control_plane_server(data_dir=data_dir)
    # The admin commands join the embedded server that `serve` runs.
    org = server.create_org("Acme")
    agent = server.enroll_agent(org["org_id"], "web-01")
    with httpx.Client(base_url=server.base_url) as client:
        config = client.get(
            "/v1/agent/config", headers={"Authorization": f"Bearer {agent['agent_key']}"}
        )
        refused = client.put(
            f"/v1/agents/{agent['agent_id']}/schedule",
            headers={"Authorization": f"Bearer {org['panel_key']}"},
            json={"enabled": True, "times": ["03:07"]},
        )
    assert config.status_code == 200
    assert config.json()["schedule"] == {"enabled": True, "times": ["03:00"]}
    assert refused.status_code == 422
    assert "times[0]: '03:07' is not on the five-minute grid" in refused.json()["detail"]["message"]
    assert (data_dir / "postgres" / "postmaster.pid").exists()

    assert server.stop() == 0
    assert "stopped" in server.stderr()
    assert "Traceback" not in server.stderr()
    assert not (data_dir / "postgres" / "postmaster.pid").exists()


def test_fake_clock_is_announced_loudly_and_drives_server_time(
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    server = control_plane_server(fake_clock="2026-10-25T00:50:00Z,speed=1")
    assert "!!! FAKE CLOCK" in server.stderr()
    agent_key = server.enroll_agent(server.create_org("Acme")["org_id"], "web-01")["agent_key"]
    with httpx.Client(base_url=server.base_url) as client:
        response = client.get("/v1/agent/config", headers={"Authorization": f"Bearer {agent_key}"})
    shown = datetime.fromisoformat(response.headers["X-Nachtwacht-Server-Time"])
    start = datetime(2026, 10, 25, 0, 50, tzinfo=UTC)
    # At speed 1 the fake clock is near its start, more than a year away from the real clock.
    assert start <= shown < start + timedelta(hours=1)
    assert response.json()["server_time"] == response.headers["X-Nachtwacht-Server-Time"]


def test_serve_flags_store_the_platform_settings(
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    server = control_plane_server(
        args=[
            "--org-cap",
            "2",
            "--timezone",
            "UTC",
            "--retention-days",
            "730",
            "--grant-margin-seconds",
            "90",
        ]
    )
    operator_key = server.create_operator_key()
    with httpx.Client(base_url=server.base_url) as client:
        settings = client.get(
            "/v1/admin/settings", headers={"Authorization": f"Bearer {operator_key}"}
        ).json()
    assert settings == {
        "timezone": "UTC",
        "catch_up_minutes": 15,
        "grant_margin_seconds": 90,
        "org_cap": 2,
        "global_cap": 25,
        "retention_days": 730,
    }


def test_keys_are_printed_once_and_stored_only_hashed(database_url: str) -> None:
    created = run_control("create-org", "Acme", "--json", "--database-url", database_url)
    assert created.returncode == 0, created.stderr
    org = json.loads(created.stdout)
    enrolled = run_control(
        "enroll-agent", "--org", org["org_id"], "--name", "web-01", "--json",
        "--database-url", database_url,
    )  # fmt: skip
    agent = json.loads(enrolled.stdout)
    operator = json.loads(
        run_control("create-operator-key", "--json", "--database-url", database_url).stdout
    )
    keys = [org["panel_key"], agent["agent_key"], operator["operator_key"]]
    assert [key[:4] for key in keys] == ["nwp_", "nwa_", "nwo_"]
    with psycopg.connect(database_url) as conn:
        stored = conn.execute("SELECT row_to_json(c)::text FROM credentials c").fetchall()
        hashes = {row[0] for row in conn.execute("SELECT secret_sha256 FROM credentials")}
    dump = " ".join(row[0] for row in stored)
    for key in keys:
        assert key not in dump
        assert hashlib.sha256(key.encode()).hexdigest() in hashes


def test_a_key_made_without_a_name_is_named_by_its_audience(database_url: str) -> None:
    def control(*args: str) -> Any:
        result = run_control(*args, "--json", "--database-url", database_url)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    org = control("create-org", "Acme")
    panel = control("create-panel-key", "--org", org["org_id"])
    operator = control("create-operator-key")
    assert (panel["org_id"], panel["name"]) == (org["org_id"], "panel key")
    assert operator["name"] == "operator key"
    assert (panel["panel_key"][:4], operator["operator_key"][:4]) == ("nwp_", "nwo_")


def test_human_output_names_the_key_once(database_url: str) -> None:
    created = run_control("create-org", "Acme", "--database-url", database_url)
    assert created.returncode == 0
    assert "shown once" in created.stdout
    assert created.stdout.count("nwp_") == 1


def test_migrate_check_applies_every_migration_to_an_empty_database(
    postgres_admin_url: str,
) -> None:
    result = run_control("migrate", "--check", "--database-url", postgres_admin_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok: ")


def test_migrate_brings_an_empty_database_to_head(empty_database_url: str) -> None:
    result = run_control("migrate", "--database-url", empty_database_url)
    assert result.returncode == 0, result.stderr
    assert "database at revision" in result.stdout


def test_serve_no_migrate_refuses_an_unmigrated_database(empty_database_url: str) -> None:
    result = run_control(
        "serve", "--port", "0", "--no-migrate", "--database-url", empty_database_url
    )
    assert result.returncode == 1
    assert "run `nachtwacht control migrate` first" in result.stderr
    assert "Traceback" not in result.stderr


def test_admin_command_refuses_an_unmigrated_external_database(empty_database_url: str) -> None:
    result = run_control("create-org", "Acme", "--database-url", empty_database_url)
    assert result.returncode == 1
    assert "nachtwacht control migrate" in result.stderr


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


BAD_INPUT = [
    pytest.param(
        ["enroll-agent", "--org", "not-a-uuid", "--name", "x"],
        {},
        "--org: 'not-a-uuid' is not an id (expected a UUID)",
        id="org_not_uuid",
    ),
    pytest.param(
        ["enroll-agent", "--org", str(uuid.UUID(int=7)), "--name", "x"],
        {},
        f"--org: '{uuid.UUID(int=7)}' is not the id of an organisation",
        id="org_unknown",
    ),
    pytest.param(
        ["create-org", "   "], {}, "NAME: '   ' must be a non-empty name", id="blank_name"
    ),
    pytest.param(
        ["serve", "--port", "70000"], {}, "--port: 70000 is not a TCP port", id="port_range"
    ),
    pytest.param(
        ["serve", "--port", "0", "--data-dir", "{data_dir}"],
        {},
        "--database-url and --data-dir: give one",
        id="both_locations",
    ),
    pytest.param(
        ["serve", "--port", "0", "--timezone", "Mars/Olympus"],
        {},
        "--timezone: 'Mars/Olympus' is not a known time zone",
        id="bad_timezone_flag",
    ),
    pytest.param(
        ["serve", "--port", "0"],
        {"NACHTWACHT_ORG_CAP": "five"},
        "NACHTWACHT_ORG_CAP: 'five' is not a whole number",
        id="bad_cap_env",
    ),
    pytest.param(
        ["serve", "--port", "0", "--retention-days", "7"],
        {},
        "--retention-days: 7 is out of range (expected between 30 and 3650)",
        id="retention_shorter_than_a_month",
    ),
    pytest.param(
        ["serve", "--port", "0"],
        {"NACHTWACHT_RETENTION_DAYS": "forever"},
        "NACHTWACHT_RETENTION_DAYS: 'forever' is not a whole number",
        id="bad_retention_env",
    ),
    # Digits `int` takes but nobody types as a number of days or a cap.
    pytest.param(
        ["serve", "--port", "0"],
        {"NACHTWACHT_RETENTION_DAYS": "\u0663\u0660"},
        "NACHTWACHT_RETENTION_DAYS: '\u0663\u0660' is not a whole number",
        id="arabic_indic_retention_env",
    ),
    pytest.param(
        ["serve", "--port", "0", "--retention-days", "\u0663\u0660"],
        {},
        "argument --retention-days: '\u0663\u0660' is not a whole number",
        id="arabic_indic_retention_flag",
    ),
    pytest.param(
        ["serve", "--port", "0", "--org-cap", "1_0"],
        {},
        "argument --org-cap: '1_0' is not a whole number",
        id="underscore_cap_flag",
    ),
    pytest.param(
        ["serve", "--port", "0"],
        {"NACHTWACHT_FAKE_CLOCK": "yesterday"},
        "'yesterday' is not an ISO 8601 instant",
        id="bad_fake_clock",
    ),
    pytest.param(["frobnicate"], {}, "invalid choice: 'frobnicate'", id="unknown_command"),
    pytest.param(["create-org", "x" * 201], {}, "is longer than 200 characters", id="long_name"),
    pytest.param(
        ["serve", "--port", "0", "--pool-size", "0"],
        {},
        "--pool-size: 0 must be at least 1",
        id="pool_size_0",
    ),
    pytest.param(
        ["serve", "--port", "0", "--release-public-key", "{data_dir}/missing.pub"],
        {},
        "--release-public-key (NACHTWACHT_RELEASE_PUBLIC_KEYS):",
        id="missing_release_key",
    ),
]


@pytest.mark.parametrize(("args", "env", "message"), BAD_INPUT)
def test_bad_input_prints_one_line_and_exits_2(
    database_url: str, data_dir: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    # Always name this test's database, so a command that wrongly went ahead touches nothing else.
    args = [arg.replace("{data_dir}", str(data_dir)) for arg in args]
    location = [] if args == ["frobnicate"] else ["--database-url", database_url]
    result = run_control(*args, *location, env=env)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_port_in_use_is_one_clear_line(database_url: str, taken_port: int) -> None:
    result = run_control("serve", "--port", str(taken_port), "--database-url", database_url)
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{taken_port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_database_is_one_clear_line(taken_port: int) -> None:
    url = f"host=127.0.0.1 port={taken_port} dbname=nachtwacht user=x connect_timeout=5"
    result = run_control("create-org", "Acme", "--database-url", url)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "nachtwacht control create-org:" in result.stderr


def test_a_fenced_database_is_said_at_once_without_the_pools_retries(database_url: str) -> None:
    """A command on a server the fence refuses (here: data of another cluster, a restore before
    `after-restore`) ends with the reason; the pool's retry warnings never start."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE database_clusters SET system_identifier = '7000000000000000001'")
    result = run_control("create-org", "Acme", "--database-url", database_url)
    assert result.returncode == 1, result.stderr
    assert "error connecting" not in result.stderr, result.stderr
    assert "reconnection attempt" not in result.stderr, result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "nachtwacht control create-org: cannot connect to the database: the database at "
        )
    ), result.stderr
    assert "holds data written on another cluster" in result.stderr.splitlines()[-1]
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM orgs").fetchone() == (0,), "nothing written"


@pytest.fixture
def release_files(tmp_path: Path) -> dict[str, Path]:
    from signed_release.keys import generate_key_files, load_private_key
    from tests.control_plane.conftest import sign_release

    private_path, public_path, _ = generate_key_files(tmp_path / "keys")
    release = sign_release(load_private_key(private_path))
    files = {"public": public_path}
    for name, content in [
        ("manifest", release.manifest),
        ("signature", release.signature),
        ("artifact", release.artifact),
    ]:
        files[name] = tmp_path / name
        files[name].write_bytes(content)
    return files


def test_publish_release_checks_the_signature_against_the_given_key(
    database_url: str, release_files: dict[str, Path]
) -> None:
    files = [str(release_files[name]) for name in ("manifest", "signature", "artifact")]
    published = run_control(
        "publish-release", *files, "--json", "--database-url", database_url,
        "--release-public-key", str(release_files["public"]),
    )  # fmt: skip
    assert published.returncode == 0, published.stderr
    answer = json.loads(published.stdout)
    assert answer["version"] == "1.5.0"
    # The pair's first release is for everyone: the last wave, reaching no agent yet.
    assert (answer["stage"], answer["wave"], answer["waves"]) == ("everyone", 4, 4)
    assert (answer["first_wave"]["agents"], answer["first_wave"]["first_slot_at"]) == (0, None)

    again = run_control(
        "publish-release", *files, "--database-url", database_url,
        env={"NACHTWACHT_RELEASE_PUBLIC_KEYS": str(release_files["public"])},
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "already published 1.5.0" in again.stdout


def test_publish_release_refuses_a_tampered_manifest(
    database_url: str, release_files: dict[str, Path]
) -> None:
    manifest = release_files["manifest"]
    manifest.write_bytes(manifest.read_bytes().replace(b'"1.5.0"', b'"6.6.6"'))
    result = run_control(
        "publish-release", str(manifest), str(release_files["signature"]),
        str(release_files["artifact"]), "--database-url", database_url,
        "--release-public-key", str(release_files["public"]),
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("nachtwacht control publish-release: SIGNATURE: does not match")
    assert "does not match the manifest bytes" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM releases").fetchone() == (0,)


def test_publish_release_with_the_manifest_and_signature_swapped_names_the_signature(
    database_url: str, release_files: dict[str, Path]
) -> None:
    result = run_control(
        "publish-release", str(release_files["signature"]), str(release_files["manifest"]),
        str(release_files["artifact"]), "--database-url", database_url,
        "--release-public-key", str(release_files["public"]),
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        "nachtwacht control publish-release: SIGNATURE: has no key_id (expected the manifest.sig"
        " `nachtwacht release sign` writes beside the manifest)\n"
    )
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM releases").fetchone() == (0,)


def test_publish_release_without_any_trusted_key_is_refused(
    database_url: str, release_files: dict[str, Path]
) -> None:
    files = [str(release_files[name]) for name in ("manifest", "signature", "artifact")]
    result = run_control("publish-release", *files, "--database-url", database_url)
    assert result.returncode == 2
    assert "no release public key is configured" in result.stderr


def test_ctrl_c_stops_serve_cleanly(
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    server = control_plane_server()
    server.process.send_signal(signal.SIGINT)
    assert server.process.wait(timeout=120) == 0
    assert "stopped" in server.stderr()
    assert "Traceback" not in server.stderr()


def test_enrolling_the_same_name_twice_is_refused(database_url: str) -> None:
    org = json.loads(
        run_control("create-org", "Acme", "--json", "--database-url", database_url).stdout
    )
    args = ["enroll-agent", "--org", org["org_id"], "--name", "web-01"]
    assert run_control(*args, "--database-url", database_url).returncode == 0
    again = run_control(*args, "--database-url", database_url)
    assert again.returncode == 2
    assert "--name: 'web-01' is already an agent of organisation" in again.stderr


def test_publish_release_says_which_patches_go_with_it_and_which_are_missing(
    database_url: str, tmp_path: Path
) -> None:
    from nachtwacht.demo_world.demo_agent import build_demo_agent
    from nachtwacht.release_cli import main as release_main

    assert release_main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    key = str(tmp_path / "keys" / "release.key")
    for number, version in enumerate(("1.4.0", "1.5.0", "1.6.0"), start=1):
        folder = tmp_path / "releases" / version
        folder.mkdir(parents=True)
        build_demo_agent(folder / f"agent-{version}.tar.gz", version=version)
        bases = ["--base", str(tmp_path / "releases")] if version == "1.6.0" else []
        argv = [
            "sign", "--key", key, "--version", version, "--platform", "linux-x86_64",
            "--manifest-version", str(number), "--out", str(folder), *bases,
            str(folder / f"agent-{version}.tar.gz"),
        ]  # fmt: skip
        assert release_main(argv) == 0
    target = tmp_path / "releases" / "1.6.0"
    patches = sorted(target.glob("patch-from-*.zst"))
    assert len(patches) == 2
    manifest = json.loads((target / "manifest.json").read_bytes())
    from_140 = next(p for p in manifest["patches"] if p["base_version"] == "1.4.0")
    missing = target / f"patch-from-{from_140['base_tar_sha256'][:16]}.zst"
    missing.unlink()

    published = run_control(
        "publish-release", str(target / "manifest.json"), str(target / "manifest.sig"),
        str(target / "agent-1.6.0.tar.gz"), "--database-url", database_url,
        "--release-public-key", str(tmp_path / "keys" / "release.pub"),
    )  # fmt: skip

    assert published.returncode == 0, published.stderr
    lines = published.stdout.splitlines()
    from_150 = next(p for p in manifest["patches"] if p["base_version"] == "1.5.0")
    assert (
        f"patch from 1.5.0: patch-from-{from_150['base_tar_sha256'][:16]}.zst"
        f" ({from_150['length']} bytes)"
    ) in lines
    assert (
        f"patch from 1.4.0: {missing} not found, skipped: hosts on 1.4.0 download the full build"
    ) in lines
