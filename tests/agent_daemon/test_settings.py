"""The agent's config file: written 0600, read back into one validated settings object, every bad
field named; paths from systemd first, then the flags, then the platform default."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from agent_daemon.commands.agent_parts import build_updater
from agent_daemon.errors import ConfigError
from agent_daemon.settings import (
    MAX_CONFIG_BYTES,
    AgentPaths,
    load_settings,
    render_config,
    resolve_paths,
    write_config,
)
from ground.clock import SystemClock
from signed_release.keys import generate_key_files, key_id, load_public_key
from tests.agent_daemon.trust_roots.chain import RootChain


def fields(key_file: Path, **overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "control_url": "https://control.example",
        "credential": "nwa_0123456789abcdef",
        "agent_id": "4b1c9a6e-0000-4000-8000-000000000001",
        "trusted_keys": [str(key_file)],
        "install_root": "/opt/provibr-agent",
        "platform": "linux-x86_64",
        "channel": "stable",
        "restart_command": ["systemctl", "restart", "provibr-agent.service"],
        "health_command": ["/opt/provibr-agent/current/bin/provibr-agent", "--version"],
    }
    base.update(overrides)
    return base


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    _, public, _ = generate_key_files(tmp_path / "keys")
    return public


def write(tmp_path: Path, document: dict[str, object]) -> AgentPaths:
    paths = AgentPaths(state_dir=tmp_path / "state", config_file=tmp_path / "agent.toml")
    write_config(paths.config_file, render_config(document))  # type: ignore[arg-type]
    return paths


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("systemctl restart agent-\U0001f680.service", id="outside_the_bmp"),
        pytest.param('quote " backslash \\ tab \t', id="escapes"),
        pytest.param("ü\u00e9\u4e2d", id="accents_and_cjk"),
    ],
)
def test_any_text_is_written_as_valid_toml_and_read_back_unchanged(
    tmp_path: Path, key_file: Path, text: str
) -> None:
    paths = write(tmp_path, fields(key_file, restart_command=["/bin/sh", "-c", text]))
    assert load_settings(paths).updater.restart_command == ("/bin/sh", "-c", text)


def test_a_written_config_reads_back_into_settings(tmp_path: Path, key_file: Path) -> None:
    paths = write(tmp_path, fields(key_file, control_url="https://control.example/"))
    settings = load_settings(paths)
    assert settings.control_url == "https://control.example"
    assert settings.trusted_key_files == (key_file,)
    updater = settings.updater
    assert updater.restart_command == ("systemctl", "restart", "provibr-agent.service")
    assert updater.health_deadline_seconds == 120.0
    assert (updater.download_read_timeout_seconds, updater.download_deadline_seconds) == (30, 900)
    assert updater.health_poll_seconds == 2.0
    assert updater.state_dir == paths.state_dir / "updater"
    assert list(updater.trusted_keys) == [key_id(load_public_key(key_file))]
    assert os.stat(paths.config_file).st_mode & 0o777 == 0o600


def test_download_limits_from_the_config_reach_the_updater(tmp_path: Path, key_file: Path) -> None:
    limits = {
        "download_read_timeout_seconds": 90.0,
        "download_deadline_seconds": 3600.0,
        "health_poll_seconds": 5.0,
    }
    settings = load_settings(write(tmp_path, fields(key_file, **limits)))
    with httpx.Client() as http:
        updater = build_updater(settings, http=http, clock=SystemClock())
    built = updater.settings
    assert built.download_read_timeout_seconds == 90.0
    assert built.download_deadline_seconds == 3600.0
    assert built.health_poll_seconds == 5.0


def test_the_credential_never_shows_in_a_repr(tmp_path: Path, key_file: Path) -> None:
    settings = load_settings(write(tmp_path, fields(key_file)))
    assert "nwa_0123456789abcdef" not in repr(settings)


def test_a_config_readable_by_others_is_refused(tmp_path: Path, key_file: Path) -> None:
    paths = write(tmp_path, fields(key_file))
    paths.config_file.chmod(0o644)
    with pytest.raises(ConfigError, match=r"mode 0644 .* expected 0600"):
        load_settings(paths)


def test_a_trusted_key_writable_by_others_is_refused(tmp_path: Path, key_file: Path) -> None:
    key_file.chmod(0o666)
    with pytest.raises(ConfigError, match=r"trusted_keys\[0\]: .* not be writable"):
        load_settings(write(tmp_path, fields(key_file)))


def test_a_missing_config_says_to_enroll(tmp_path: Path) -> None:
    paths = AgentPaths(state_dir=tmp_path, config_file=tmp_path / "agent.toml")
    with pytest.raises(ConfigError, match="nachtwacht agent enroll"):
        load_settings(paths)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        pytest.param(
            {"control_url": "ftp://control.example"},
            r"control_url: found 'ftp://control.example' — expected an http\(s\) URL",
            id="url_scheme",
        ),
        pytest.param(
            {"credential": "nwp_panel_key"},
            r"credential: the value given \(not shown\) — expected an agent credential starting "
            "with nwa_",
            id="panel_credential",
        ),
        pytest.param(
            {"install_root": "opt/agent"},
            r"install_root: found 'opt/agent' — expected an absolute path",
            id="relative_install_root",
        ),
        pytest.param(
            {"trusted_keys": []},
            r"trusted_keys: found none, and no trust root is held at .*trust_root.json — ",
            id="no_trusted_key_and_no_trust_root",
        ),
        pytest.param(
            {"trusted_keys": ["keys/release.pub"]},
            r"'keys/release.pub': expected an absolute path",
            id="relative_key_path",
        ),
        pytest.param(
            {"health_deadline_seconds": -1.0},
            r"health_deadline_seconds: found -1.0 — ",
            id="negative_deadline",
        ),
        pytest.param(
            {"download_read_timeout_seconds": 0.0},
            r"download_read_timeout_seconds: found 0.0 — ",
            id="zero_read_timeout",
        ),
        pytest.param(
            {"download_deadline_seconds": 100000.0},
            r"download_deadline_seconds: found 100000.0 — ",
            id="deadline_over_a_day",
        ),
        pytest.param(
            {"health_poll_seconds": -2.0},
            r"health_poll_seconds: found -2.0 — ",
            id="negative_health_poll",
        ),
        pytest.param({"restart_command": []}, r"restart_command: found \(\)", id="empty_restart"),
        pytest.param({"colour": "blue"}, r"colour: unknown field", id="typo_field"),
    ],
)
def test_a_bad_field_is_named_with_its_value(
    tmp_path: Path, key_file: Path, override: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(write(tmp_path, fields(key_file, **override)))


def test_a_missing_field_is_named(tmp_path: Path, key_file: Path) -> None:
    document = fields(key_file)
    del document["credential"]
    with pytest.raises(ConfigError, match="credential: missing"):
        load_settings(write(tmp_path, document))


def test_a_config_from_a_newer_agent_is_refused(tmp_path: Path, key_file: Path) -> None:
    paths = write(tmp_path, fields(key_file))
    text = paths.config_file.read_text().replace("format_version = 1", "format_version = 7")
    write_config(paths.config_file, text)
    with pytest.raises(ConfigError, match="format_version 7 was written by a newer agent"):
        load_settings(paths)


def test_not_toml_is_refused(tmp_path: Path) -> None:
    paths = AgentPaths(state_dir=tmp_path, config_file=tmp_path / "agent.toml")
    write_config(paths.config_file, "control_url = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(paths)


def test_a_config_past_its_bound_is_refused_not_read_whole(tmp_path: Path, key_file: Path) -> None:
    """The config may be the non-root daemon's user's while root reads it (`status`): a file
    grown past anything the agent writes is named with the limit, never read to its end."""
    paths = write(tmp_path, fields(key_file))
    with paths.config_file.open("ab") as opened:
        opened.write(b"# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    before = paths.config_file.read_bytes()
    with pytest.raises(ConfigError) as raised:
        load_settings(paths)
    assert str(raised.value) == (
        f"{paths.config_file}: larger than {MAX_CONFIG_BYTES} bytes — expected the agent's config"
    )
    assert paths.config_file.read_bytes() == before


@pytest.mark.parametrize(
    ("environ", "flag", "expected_state", "expected_config"),
    [
        pytest.param(
            {"STATE_DIRECTORY": "/var/lib/nachtwacht-agent"},
            "/srv/ignored",
            "/var/lib/nachtwacht-agent",
            "/var/lib/nachtwacht-agent/agent.toml",
            id="systemd_state_directory_wins",
        ),
        pytest.param(
            {"STATE_DIRECTORY": "/var/lib/a:/var/lib/b", "CONFIGURATION_DIRECTORY": "/etc/nw"},
            None,
            "/var/lib/a",
            "/etc/nw/agent.toml",
            id="systemd_first_of_several_and_configuration_directory",
        ),
        pytest.param({}, "/srv/agent", "/srv/agent", "/srv/agent/agent.toml", id="flag"),
    ],
)
def test_paths_come_from_systemd_then_flags(
    environ: dict[str, str],
    flag: str | None,
    expected_state: str,
    expected_config: str,
) -> None:
    paths = resolve_paths(state_dir=flag, config_file=None, environ=environ)
    assert paths.state_dir == Path(expected_state)
    assert paths.config_file == Path(expected_config)


def test_paths_fall_back_to_the_platform_state_directory() -> None:
    paths = resolve_paths(state_dir=None, config_file=None, environ={})
    assert "nachtwacht-agent" in str(paths.state_dir)


def test_a_host_that_holds_a_trust_root_needs_no_key_file(tmp_path: Path, key_file: Path) -> None:
    paths = write(tmp_path, fields(key_file, trusted_keys=[]))
    (paths.state_dir / "trust_root.json").parent.mkdir(parents=True)
    (paths.state_dir / "trust_root.json").write_bytes(RootChain().versions[1])
    settings = load_settings(paths)
    assert settings.trusted_key_files == ()
    assert not settings.updater.trusted_keys
    assert settings.updater.trust_root_file == paths.state_dir / "trust_root.json"
