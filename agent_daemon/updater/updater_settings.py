"""The updater's settings: its section of the agent's one settings model (`AgentSettings.updater`).

Each field and its bounds are declared here once; the agent's config file reads these same fields
(`agent_daemon.settings` builds its file model from them), and the updater takes the section as it
is. Built and validated at once: an impossible value is a `ConfigError` (a `ValueError`) whose
message starts with the field, then the value found and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import AfterValidator, ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo

from agent_daemon.errors import ConfigError, describe_validation_error

__all__ = [
    "DEFAULT_RESTART_COMMAND",
    "FIELD_INFO",
    "FILE_FIELDS",
    "UpdaterSettings",
    "absolute_path",
]

DEFAULT_RESTART_COMMAND = ("systemctl", "restart", "provibr-agent.service")


def absolute_path(path: Path) -> Path:
    # A relative path would mean something else under every working directory systemd picks.
    if not path.is_absolute():
        raise ValueError("expected an absolute path")
    return path


AbsolutePath = Annotated[Path, AfterValidator(absolute_path)]
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
    trusted_keys: Mapping[str, Ed25519PublicKey] = Field(min_length=1)
    platform: str = Field(min_length=1)
    channel: str = Field(min_length=1)
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


class UpdaterSettings(_UpdaterFields):
    """Where the managed agent lives, which keys and build it accepts, how it is restarted and
    checked, and how long each step may take."""

    def __init__(self, **fields: Any) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc, source=None)) from exc


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
)
