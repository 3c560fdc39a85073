"""The updater's settings: its section of the agent's one settings model (`AgentSettings.updater`).

Each field and its bounds are declared here once; the agent's config file reads these same fields
(`agent_daemon.settings` builds its file model from them), and the updater takes the section as it
is. Built and validated at once: an impossible value is a `ConfigError` (a `ValueError`) whose
message starts with the field, then the value found and what was expected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo

from agent_daemon.errors import ConfigError, UntrustedArtifactSource, describe_validation_error
from agent_daemon.path_fields import AbsolutePath
from agent_daemon.updater.download.artifact_source import parse_origin
from agent_daemon.updater.trusted_keys import TrustedKeys
from ground.limits import RELEASE_NAME_PATTERN

__all__ = [
    "DEFAULT_RESTART_COMMAND",
    "FIELD_INFO",
    "FILE_FIELDS",
    "UpdaterSettings",
]

DEFAULT_RESTART_COMMAND = ("systemctl", "restart", "provibr-agent.service")


def artifact_origin(text: str) -> str:
    try:
        parse_origin(text)
    except UntrustedArtifactSource as exc:
        raise ValueError(str(exc).removeprefix("artifact_origins: ")) from exc
    return text


def user_name(text: str) -> str:
    # A login name or a numeric uid; resolved when a build's command runs (it may be created later).
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}\$?|[0-9]{1,10}", text):
        raise ValueError("expected a user name such as provibr (or a numeric uid)")
    return text


def trusted_keys(value: object) -> TrustedKeys:
    # Key objects a caller built itself are taken too; the agent's own loader reads the files
    # without `cryptography` (`trusted_keys.read_trusted_keys`).
    keys = value if isinstance(value, TrustedKeys) else None
    if keys is None and isinstance(value, Mapping):
        keys = TrustedKeys.of(value)
    if keys is None:
        raise ValueError("expected the trusted release keys by key id")
    # None at all is allowed here: a host that holds a trust root trusts the root's keys
    # (`UpdaterSettings` requires one or the other).
    return keys


ArtifactOrigin = Annotated[str, AfterValidator(artifact_origin)]
UserName = Annotated[str, AfterValidator(user_name)]
TrustedKeysField = Annotated[TrustedKeys, BeforeValidator(trusted_keys)]
Command = Annotated[tuple[str, ...], Field(min_length=1)]


def _seconds(default: float, most: float) -> Any:
    # Strict: `true` is not a number of seconds. Product seconds: they follow a fast fake clock.
    return Field(default=default, gt=0, le=most, strict=True, allow_inf_nan=False)


# A dataclass, not a model: callers adjust one field with `dataclasses.replace`, which builds and
# validates a new one through `UpdaterSettings.__init__`.
@dataclass(
    frozen=True,
    kw_only=True,
    config=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
)
class _UpdaterFields:
    install_root: AbsolutePath
    state_dir: Path
    # Key id → key; each key object is built when an update first verifies with it. Consulted
    # only while no trust root is held (`trust_root_file`).
    trusted_keys: TrustedKeysField = Field(default_factory=lambda: TrustedKeys({}))
    # Where the held trust root is (`disk.held_trust_root`); while that file exists its release
    # keys are the trusted ones, read again each time an update verifies.
    trust_root_file: Path | None = None
    # The manifest's names (`stable`, `linux-x86_64`): the pair this agent follows.
    platform: str = Field(pattern=RELEASE_NAME_PATTERN)
    channel: str = Field(pattern=RELEASE_NAME_PATTERN)
    restart_command: Command = DEFAULT_RESTART_COMMAND
    # Must exit 0 and print the version of the agent that is actually running.
    health_command: Command
    health_deadline_seconds: float = _seconds(120.0, 3600)
    disk_reserve_bytes: int = Field(default=50 * 1024 * 1024, ge=0)
    # A slow customer uplink may need more than these defaults.
    download_read_timeout_seconds: float = _seconds(30.0, 600)
    download_deadline_seconds: float = _seconds(900.0, 86400)
    # Between two health probes.
    health_poll_seconds: float = _seconds(2.0, 60)
    # Origins (`https://mirror.example[:port]`) the artifact may come from besides the control
    # plane's own; they are fetched without the agent's credential (`artifact_source`).
    artifact_origins: tuple[ArtifactOrigin, ...] = Field(default=(), max_length=16)
    # The managed agent's user (systemd's `User=` of its unit): the build's own code — its
    # self-test and the health command — runs as this user, not as the updater's.
    agent_user: UserName | None = None


class UpdaterSettings(_UpdaterFields):
    """Where the managed agent lives, which keys and build it accepts, how it is restarted and
    checked, and how long each step may take."""

    def __init__(self, **fields: Any) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc, source=None)) from exc
        if not self.trusted_keys and self.trust_root_file is None:
            raise ConfigError(
                "trusted_keys: found none and no trust_root_file — expected at least one trusted "
                "release key, or a trust root"
            )


# Each field as declared above, for the agent's config file to reuse (bounds and all).
FIELD_INFO: dict[str, FieldInfo] = _UpdaterFields.__pydantic_fields__  # type: ignore[attr-defined]  # set by pydantic's decorator

# The updater's fields an agent's config file holds (the rest come from the daemon: where its
# state lives, and the keys loaded from the files the config names).
FILE_FIELDS = (
    "install_root",
    "platform",
    "channel",
    "restart_command",
    "health_command",
    "health_deadline_seconds",
    "download_read_timeout_seconds",
    "download_deadline_seconds",
    "health_poll_seconds",
    "artifact_origins",
    "agent_user",
)
