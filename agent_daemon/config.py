"""The agent's configuration: where it lives, what it holds, and how it is validated.

`nachtwacht agent enroll` writes one TOML file; `nachtwacht agent run` and `status` read it into one
frozen `AgentSettings`, validated at once, naming the bad field. The file holds the agent's
credential and the paths of the trusted release keys, so it must be owned by the user the daemon
runs as (root on a customer host) and readable by nobody else (mode 0600): trusted keys come from
root-owned configuration, never from a writable cache.

Paths: the state directory is `$STATE_DIRECTORY` when systemd sets it, else `--state-dir`, else
the platform's state directory. The config file is `--config`, else
`$CONFIGURATION_DIRECTORY/agent.toml`, else `<state dir>/agent.toml`.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_daemon.atomic_file import write_bytes_atomically
from agent_daemon.errors import ConfigError, describe_validation_error

__all__ = [
    "CONFIG_FILE_NAME",
    "CONFIG_FORMAT_VERSION",
    "AgentPaths",
    "AgentSettings",
    "load_settings",
    "render_config",
    "resolve_paths",
    "write_config",
]

CONFIG_FILE_NAME = "agent.toml"
CONFIG_FORMAT_VERSION = 1
APP_NAME = "nachtwacht-agent"
DEFAULT_RESTART_COMMAND = ("systemctl", "restart", "provibr-agent.service")
DEFAULT_INSTALL_ROOT = "/opt/provibr-agent"


@dataclass(frozen=True, kw_only=True)
class AgentPaths:
    state_dir: Path
    config_file: Path


def resolve_paths(
    *,
    state_dir: str | None,
    config_file: str | None,
    environ: Mapping[str, str],
) -> AgentPaths:
    """systemd's directories first, then the flags, then the platform's defaults."""
    systemd_state = environ.get("STATE_DIRECTORY", "").split(":")[0]
    if systemd_state:
        chosen_state = Path(systemd_state)
    elif state_dir:
        chosen_state = Path(state_dir)
    else:
        chosen_state = platformdirs.user_state_path(APP_NAME)
    if config_file:
        chosen_config = Path(config_file)
    elif systemd_config := environ.get("CONFIGURATION_DIRECTORY", "").split(":")[0]:
        chosen_config = Path(systemd_config) / CONFIG_FILE_NAME
    else:
        chosen_config = chosen_state / CONFIG_FILE_NAME
    return AgentPaths(state_dir=chosen_state.absolute(), config_file=chosen_config.absolute())


class _ConfigFile(BaseModel):
    """The TOML document, field by field; unknown fields are refused (a typo must not pass)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format_version: Literal[1]
    control_url: str
    credential: str
    agent_id: str = Field(min_length=1)
    trusted_keys: tuple[str, ...] = Field(min_length=1)
    install_root: str
    platform: str = Field(min_length=1)
    channel: str = Field(min_length=1)
    restart_command: tuple[str, ...] = Field(min_length=1)
    health_command: tuple[str, ...] = Field(min_length=1)
    health_deadline_seconds: float = Field(default=120.0, gt=0, le=3600)
    request_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # The download's limits: a slow customer uplink may need more than the defaults.
    download_read_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    download_deadline_seconds: float = Field(default=900.0, gt=0, le=86400)
    health_poll_seconds: float = Field(default=2.0, gt=0, le=60)

    @field_validator("control_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ValueError("expected an http(s) URL such as https://control.example")
        if parts.query or parts.fragment:
            raise ValueError("expected a base URL without ?query or #fragment")
        return value.rstrip("/")

    @field_validator("credential")
    @classmethod
    def _agent_credential(cls, value: str) -> str:
        if not value.startswith("nwa_") or len(value) < 8 or any(c.isspace() for c in value):
            raise ValueError("expected an agent credential starting with nwa_")
        return value

    @field_validator("install_root")
    @classmethod
    def _absolute_dir(cls, value: str) -> str:
        if not Path(value).is_absolute():
            raise ValueError("expected an absolute path")
        return value

    @field_validator("trusted_keys")
    @classmethod
    def _absolute_paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for index, item in enumerate(value):
            if not Path(item).is_absolute():
                raise ValueError(f"[{index}] {item!r}: expected an absolute path to a release.pub")
        return value


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    """Everything the daemon is configured with, validated; passed to constructors, never global."""

    config_file: Path
    state_dir: Path
    control_url: str
    credential: str
    agent_id: str
    trusted_key_files: tuple[Path, ...]
    install_root: Path
    platform: str
    channel: str
    restart_command: tuple[str, ...]
    health_command: tuple[str, ...]
    health_deadline_seconds: float = 120.0
    request_timeout_seconds: float = 10.0
    download_read_timeout_seconds: float = 30.0
    download_deadline_seconds: float = 900.0
    health_poll_seconds: float = 2.0

    def __repr__(self) -> str:
        # The credential must never reach a log line through a repr.
        return f"AgentSettings(agent_id={self.agent_id!r}, control_url={self.control_url!r}, …)"


def _check_file_is_private(path: Path) -> None:
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        raise ConfigError(
            f"{path}: no agent config here (run `nachtwacht agent enroll` first)"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from exc
    if info.st_mode & 0o077:
        raise ConfigError(
            f"{path}: mode {stat.S_IMODE(info.st_mode):04o} lets other users read the agent's "
            "credential; expected 0600 (chmod 600 it)"
        )
    if info.st_uid != os.geteuid():
        raise ConfigError(
            f"{path}: owned by uid {info.st_uid}, expected the daemon's own user "
            f"(uid {os.geteuid()}); trusted keys must not come from a file another user controls"
        )


def _check_key_file_is_protected(field: str, path: Path) -> None:
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"{field}: {str(path)!r} cannot be read ({exc.strerror})") from exc
    if info.st_mode & 0o022:
        raise ConfigError(
            f"{field}: {str(path)!r} has mode {stat.S_IMODE(info.st_mode):04o}; a trusted key "
            "must not be writable by group or others (expected e.g. 0644 or 0600)"
        )
    if info.st_uid not in {0, os.geteuid()}:
        raise ConfigError(
            f"{field}: {str(path)!r} is owned by uid {info.st_uid}; a trusted key must be owned "
            f"by root or the daemon's user (uid {os.geteuid()})"
        )


def load_settings(paths: AgentPaths) -> AgentSettings:
    """Read, check and validate the config file; a problem is a `ConfigError` naming the field."""
    path = paths.config_file
    _check_file_is_private(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from exc
    version = document.get("format_version")
    if isinstance(version, int) and version > CONFIG_FORMAT_VERSION:
        raise ConfigError(
            f"{path}: format_version {version} was written by a newer agent "
            f"(this one understands {CONFIG_FORMAT_VERSION})"
        )
    try:
        parsed = _ConfigFile.model_validate(_lists_as_tuples(document))
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, str(path))) from exc
    key_files = tuple(Path(item) for item in parsed.trusted_keys)
    for index, key_file in enumerate(key_files):
        _check_key_file_is_protected(f"trusted_keys[{index}]", key_file)
    return AgentSettings(
        config_file=path,
        state_dir=paths.state_dir,
        control_url=parsed.control_url,
        credential=parsed.credential,
        agent_id=parsed.agent_id,
        trusted_key_files=key_files,
        install_root=Path(parsed.install_root),
        platform=parsed.platform,
        channel=parsed.channel,
        restart_command=parsed.restart_command,
        health_command=parsed.health_command,
        health_deadline_seconds=parsed.health_deadline_seconds,
        request_timeout_seconds=parsed.request_timeout_seconds,
        download_read_timeout_seconds=parsed.download_read_timeout_seconds,
        download_deadline_seconds=parsed.download_deadline_seconds,
        health_poll_seconds=parsed.health_poll_seconds,
    )


def _lists_as_tuples(document: dict[str, Any]) -> dict[str, Any]:
    # TOML arrays arrive as lists; strict mode wants the tuples the model declares.
    return {k: tuple(v) if isinstance(v, list) else v for k, v in document.items()}


def render_config(fields: Mapping[str, str | float | Sequence[str]]) -> str:
    """The TOML text for the config fields (strings, numbers and lists of strings only)."""
    lines = [
        "# nachtwacht agent configuration, written by `nachtwacht agent enroll`.",
        "# Holds the agent's credential: keep it mode 0600, owned by the daemon's user.",
        f"format_version = {CONFIG_FORMAT_VERSION}",
    ]
    for name, value in fields.items():
        lines.append(f"{name} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: str | float | Sequence[str]) -> str:
    # A JSON string is a valid TOML basic string: the same escapes, \uXXXX included.
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(float(value))
    return "[" + ", ".join(json.dumps(item) for item in value) + "]"


def write_config(path: Path, text: str) -> None:
    """Write the config atomically, mode 0600 from the first byte on (never briefly readable)."""
    write_bytes_atomically(path, text.encode("utf-8"), mode=0o600)
