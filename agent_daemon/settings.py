"""The agent's one settings model: where it lives, what it holds, and how it is validated.

`nachtwacht agent enroll` turns its flags into one TOML file (`agent.toml`); `nachtwacht agent run`
and `status` read it, with the paths from systemd's environment and the flags, into one frozen
`AgentSettings` with the updater's section (`UpdaterSettings`) nested in it — validated at once,
every bad field named with its value and what was expected. Each bound is declared once: the
updater's in `UpdaterSettings`, the agent's here; the file's model is assembled from both.

The agent's proxy and trust fields (`proxy`, `no_proxy`, `ca_file`, `pinned_public_key_sha256`,
`client_cert`, `client_key`, `insecure_http`) are declared in
`agent_daemon.connection.network_settings` and held as `AgentSettings.network`; the files they
name are checked here, and a plain http control URL to a host that is not loopback is refused
unless `insecure_http` allows it.

The file holds the agent's credential and the paths of the trusted release keys, so it must be
owned by the user the daemon runs as (root on a customer host) and readable by nobody else (mode
0600): trusted keys come from root-owned configuration, never from a writable cache. A host that
holds a trust root (`trust_root.json` in the state directory, `disk.held_trust_root`) trusts that
root's release keys instead and may name no key file at all.

Paths: the state directory is `$STATE_DIRECTORY` when systemd sets it, else `--state-dir`, else
(as root) the shipped unit's `/var/lib/nachtwacht-agent`, else the platform's state directory. The
config file is `--config`, else `$CONFIGURATION_DIRECTORY/agent.toml`, else (as root, when no state
directory was named either) the unit's `/etc/nachtwacht-agent/agent.toml`, else
`<state dir>/agent.toml` — so `agent enroll` run by hand as root writes where the unit reads.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    ValidationError,
    create_model,
)

from agent_daemon.connection.network_settings import (
    MAX_PEM_FILE_BYTES,
    NETWORK_FILE_FIELDS,
    NetworkSettings,
    check_control_url_transport,
    pem_file_too_large,
)
from agent_daemon.disk.atomic_file import write_bytes_atomically
from agent_daemon.disk.held_trust_root import TRUST_ROOT_FILE_NAME
from agent_daemon.errors import ConfigError, describe_validation_error
from agent_daemon.updater.trusted_keys import read_trusted_keys
from agent_daemon.updater.updater_settings import (
    DEFAULT_RESTART_COMMAND,
    FIELD_INFO,
    FILE_FIELDS,
    UpdaterSettings,
)
from ground.contract import AGENT_CREDENTIAL_PREFIX
from ground.control_url import check_control_url
from ground.planted_files import NotRegularFile, open_regular, read_regular
from signed_release.errors import ReleaseError

__all__ = [
    "CONFIG_FILE_NAME",
    "CONFIG_FORMAT_VERSION",
    "DEFAULT_INSTALL_ROOT",
    "DEFAULT_RESTART_COMMAND",
    "MAX_CONFIG_BYTES",
    "SYSTEM_CONFIG_DIR",
    "SYSTEM_STATE_DIR",
    "UPDATER_DIR_NAME",
    "AgentPaths",
    "AgentSettings",
    "is_bearer_text",
    "load_settings",
    "render_config",
    "resolve_paths",
    "write_config",
]

CONFIG_FILE_NAME = "agent.toml"
CONFIG_FORMAT_VERSION = 1
# The most the config holds: its longest lists (trusted keys, no_proxy, artifact origins) are a
# few KiB. A larger file was not written by `enroll` and is not read to its end.
MAX_CONFIG_BYTES = 1024 * 1024
APP_NAME = "nachtwacht-agent"
# Inside the state directory: the updater's own state file, staging area and update lock.
UPDATER_DIR_NAME = "updater"
DEFAULT_INSTALL_ROOT = "/opt/provibr-agent"
# Where the shipped unit (packaging/systemd/nachtwacht-agent.service) keeps them: systemd's
# StateDirectory= and ConfigurationDirectory= roots with the unit's directory name.
SYSTEM_STATE_DIR = Path("/var/lib") / APP_NAME
SYSTEM_CONFIG_DIR = Path("/etc") / APP_NAME


@dataclass(frozen=True, kw_only=True)
class AgentPaths:
    state_dir: Path
    config_file: Path


def resolve_paths(
    *,
    state_dir: str | None,
    config_file: str | None,
    environ: Mapping[str, str],
    euid: int | None = None,
) -> AgentPaths:
    """systemd's directories first, then the flags, then (as root) the unit's, then the
    platform's defaults. `euid` defaults to this process's."""
    as_root = (os.geteuid() if euid is None else euid) == 0
    systemd_state = environ.get("STATE_DIRECTORY", "").split(":")[0]
    if systemd_state:
        chosen_state = Path(systemd_state)
    elif state_dir:
        chosen_state = Path(state_dir)
    elif as_root:
        chosen_state = SYSTEM_STATE_DIR
    else:
        # Imported here: only a command run by hand, without a state directory, needs it.
        import platformdirs

        chosen_state = platformdirs.user_state_path(APP_NAME)
    if config_file:
        chosen_config = Path(config_file)
    elif systemd_config := environ.get("CONFIGURATION_DIRECTORY", "").split(":")[0]:
        chosen_config = Path(systemd_config) / CONFIG_FILE_NAME
    elif as_root and not systemd_state and not state_dir:
        chosen_config = SYSTEM_CONFIG_DIR / CONFIG_FILE_NAME
    else:
        chosen_config = chosen_state / CONFIG_FILE_NAME
    return AgentPaths(state_dir=chosen_state.absolute(), config_file=chosen_config.absolute())


def is_bearer_text(value: str) -> bool:
    """Whether `value` can travel as a bearer secret in an HTTP header: visible ASCII only (no
    space, no control character, nothing an ASCII header cannot carry)."""
    return bool(value) and all("!" <= character <= "~" for character in value)


def _agent_credential(value: str) -> str:
    if not value.startswith(AGENT_CREDENTIAL_PREFIX) or len(value) < 8 or not is_bearer_text(value):
        raise ValueError("expected an agent credential starting with nwa_, visible ASCII only")
    return value


def _absolute_key_paths(value: tuple[Path, ...]) -> tuple[Path, ...]:
    for index, item in enumerate(value):
        if not item.is_absolute():
            raise ValueError(f"[{index}] {str(item)!r}: expected an absolute path to a release.pub")
    return value


ControlUrl = Annotated[str, AfterValidator(check_control_url)]
AgentCredential = Annotated[str, AfterValidator(_agent_credential)]
# None at all is allowed: a host that holds a trust root trusts the root's release keys.
TrustedKeyFiles = Annotated[tuple[Path, ...], AfterValidator(_absolute_key_paths)]


class AgentSettings(BaseModel):
    """Everything the agent is configured with, validated at once; passed to constructors, never
    global. `updater` is the updater's section, taken by `Updater` as it is."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    config_file: Path
    state_dir: Path
    control_url: ControlUrl
    # Never in a repr: the credential must not reach a log line.
    credential: AgentCredential = Field(repr=False)
    agent_id: str = Field(min_length=1)
    # The release.pub files trusted while no trust root is held (and to accept its version 1).
    trusted_key_files: TrustedKeyFiles = ()
    request_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, strict=True, allow_inf_nan=False
    )
    # Validated when it was built (`UpdaterSettings.__init__`); here it is taken as it is.
    updater: InstanceOf[UpdaterSettings]
    # Proxy and trust (`agent_daemon.connection.network_settings`); flat fields in the file.
    network: NetworkSettings = NetworkSettings()


# The agent's own fields in the file; the updater's (`FILE_FIELDS`) are declared by
# `UpdaterSettings` and reused as they are, so a bound is written once.
_AGENT_FILE_FIELDS = {"control_url", "credential", "agent_id", "request_timeout_seconds"}


def _file_fields() -> dict[str, Any]:
    fields: dict[str, Any] = {
        "format_version": (Literal[1], ...),
        # The file names the key files; the settings hold both the files and the loaded keys.
        "trusted_keys": (TrustedKeyFiles, ()),
    }
    declared = (
        (AgentSettings.model_fields, _AGENT_FILE_FIELDS),
        (FIELD_INFO, FILE_FIELDS),
        (NetworkSettings.model_fields, NETWORK_FILE_FIELDS),
    )
    for infos, names in declared:
        for name in names:
            fields[name] = (infos[name].annotation, infos[name])
    return fields


# The TOML document, field by field: unknown fields are refused (a typo must not pass silently).
_ConfigFile = create_model(
    "_ConfigFile", __config__=ConfigDict(extra="forbid", frozen=True), **_file_fields()
)


def _check_file_is_private(path: Path, *, for_display: bool) -> int:
    """Refuse a config others can read or another user controls; return the daemon's uid (the
    uid the other files are checked against)."""
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        raise ConfigError(
            f"{path}: no agent config here (run `nachtwacht agent enroll` first)"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from exc
    if not stat.S_ISREG(info.st_mode):
        # A named pipe would hold every command that reads it (and the daemon) forever.
        raise ConfigError(
            f"{path}: not a regular file (a pipe, a device or a folder) — expected the agent's "
            "config"
        )
    if info.st_mode & 0o077:
        raise ConfigError(
            f"{path}: mode {stat.S_IMODE(info.st_mode):04o} lets other users read the agent's "
            "credential; expected 0600 (chmod 600 it)"
        )
    if info.st_uid == os.geteuid():
        return info.st_uid
    if for_display and os.geteuid() == 0:
        # Root looking at a daemon that runs as its own user (the non-root mode): the file is
        # that daemon's, and nothing in it is trusted, run or sent on root's behalf.
        return info.st_uid
    raise ConfigError(
        f"{path}: owned by uid {info.st_uid}, expected the daemon's own user "
        f"(uid {os.geteuid()}); trusted keys must not come from a file another user controls"
    )


def _check_key_file_is_protected(field: str, path: Path, daemon_uid: int) -> None:
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"{field}: {str(path)!r} cannot be read ({exc.strerror})") from exc
    if info.st_mode & 0o022:
        raise ConfigError(
            f"{field}: {str(path)!r} has mode {stat.S_IMODE(info.st_mode):04o}; a trusted key "
            "must not be writable by group or others (expected e.g. 0644 or 0600)"
        )
    if info.st_uid not in {0, daemon_uid}:
        raise ConfigError(
            f"{field}: {str(path)!r} is owned by uid {info.st_uid}; a trusted key must be owned "
            f"by root or the daemon's user (uid {daemon_uid})"
        )


def _check_network_files(network: NetworkSettings, daemon_uid: int) -> None:
    for field in ("ca_file", "client_cert", "client_key"):
        path: Path | None = getattr(network, field)
        if path is None:
            continue
        try:
            with open_regular(path, follow_links=True) as opened:
                info = os.fstat(opened.fileno())
        except NotRegularFile as exc:
            raise ConfigError(
                f"{field}: {str(path)!r}: {exc.strerror} — expected a PEM file"
            ) from exc
        except OSError as exc:
            raise ConfigError(f"{field}: {str(path)!r} cannot be read ({exc.strerror})") from exc
        if info.st_size > MAX_PEM_FILE_BYTES:
            raise pem_file_too_large(field, path)
        if field == "ca_file" and (info.st_mode & 0o022 or info.st_uid not in {0, daemon_uid}):
            # Whoever can write the CA file can make the agent trust their own control plane.
            raise ConfigError(
                f"ca_file: {str(path)!r} has mode {stat.S_IMODE(info.st_mode):04o} and owner uid "
                f"{info.st_uid}; a trusted CA must be owned by root (or the daemon's user) and "
                "not writable by group or others (expected e.g. 0644)"
            )
        if field == "client_key" and info.st_mode & 0o077:
            raise ConfigError(
                f"client_key: {str(path)!r} has mode {stat.S_IMODE(info.st_mode):04o}, so other "
                "users can read the agent's private key; expected 0600 (chmod 600 it)"
            )


def load_settings(paths: AgentPaths, *, for_display: bool = False) -> AgentSettings:
    """Read, check and validate the config file; a problem is a `ConfigError` naming the field.

    `for_display` is for a command that only reads and shows (`agent status`): run by root, it
    may read the config of a daemon that runs as its own user, and checks the files it names
    as that daemon does. Nothing loaded so is trusted, run or sent — the checks on ownership
    exist so that root never acts on a file a less privileged user controls."""
    path = paths.config_file
    daemon_uid = _check_file_is_private(path, for_display=for_display)
    try:
        # Opened as a planted file: the stat above may be of another file than the one read.
        data = read_regular(path, MAX_CONFIG_BYTES, follow_links=True)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: larger than {MAX_CONFIG_BYTES} bytes — expected the agent's config"
            )
        document = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    except NotRegularFile as exc:
        raise ConfigError(f"{path}: {exc.strerror} — expected the agent's config") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from exc
    version = document.get("format_version")
    if isinstance(version, int) and version > CONFIG_FORMAT_VERSION:
        raise ConfigError(
            f"{path}: format_version {version} was written by a newer agent "
            f"(this one understands {CONFIG_FORMAT_VERSION})"
        )
    try:
        parsed = _ConfigFile.model_validate(_lists_as_tuples(document)).model_dump()
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, str(path))) from exc
    try:
        network = NetworkSettings.model_validate({n: parsed[n] for n in NETWORK_FILE_FIELDS})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, str(path))) from exc
    try:
        check_control_url_transport(parsed["control_url"], insecure_http=network.insecure_http)
        _check_network_files(network, daemon_uid)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    key_files: tuple[Path, ...] = parsed["trusted_keys"]
    trust_root_file = paths.state_dir / TRUST_ROOT_FILE_NAME
    if not key_files and not trust_root_file.exists():
        raise ConfigError(
            f"{path}: trusted_keys: found none, and no trust root is held at {trust_root_file} — "
            "expected at least one release.pub (--trusted-key PATH), or a trust root "
            "(`nachtwacht agent enroll --trust-root FILE`)"
        )
    for index, key_file in enumerate(key_files):
        _check_key_file_is_protected(f"trusted_keys[{index}]", key_file, daemon_uid)
    try:
        trusted_keys = read_trusted_keys(key_files)
    except ReleaseError as exc:
        raise ConfigError(f"{path}: trusted_keys: {exc}") from exc
    try:
        return AgentSettings(
            config_file=path,
            state_dir=paths.state_dir,
            trusted_key_files=key_files,
            network=network,
            updater=UpdaterSettings(
                state_dir=paths.state_dir / UPDATER_DIR_NAME,
                trusted_keys=trusted_keys,
                trust_root_file=trust_root_file,
                **{name: parsed[name] for name in FILE_FIELDS},
            ),
            **{name: parsed[name] for name in _AGENT_FILE_FIELDS},
        )
    except (ValidationError, ConfigError) as exc:
        # Everything was validated above; this only guards against the two models drifting.
        raise ConfigError(f"{path}: {exc}") from exc


def _lists_as_tuples(document: dict[str, Any]) -> dict[str, Any]:
    # TOML arrays arrive as lists; strict mode wants the tuples the model declares.
    return {k: tuple(v) if isinstance(v, list) else v for k, v in document.items()}


def render_config(fields: Mapping[str, str | float | bool | Sequence[str]]) -> str:
    """The TOML text for the config fields (strings, numbers, booleans, lists of strings).

    Written by `tomli_w`, not by hand: a hand-made writer once produced invalid TOML for
    characters outside the Basic Multilingual Plane (JSON's surrogate-pair escapes)."""
    document: dict[str, object] = {"format_version": CONFIG_FORMAT_VERSION}
    for name, value in fields.items():
        if isinstance(value, str | bool):
            document[name] = value
        elif isinstance(value, int | float):
            # Durations are floats in the settings model: 120 is written as 120.0.
            document[name] = float(value)
        else:
            document[name] = list(value)
    header = (
        "# nachtwacht agent configuration, written by `nachtwacht agent enroll`.\n"
        "# Holds the agent's credential: keep it mode 0600, owned by the daemon's user.\n"
    )
    # Imported here: only `enroll` writes a config; the daemon never does.
    import tomli_w

    return header + tomli_w.dumps(document)


def write_config(path: Path, text: str) -> None:
    """Write the config atomically, mode 0600 from the first byte on (never briefly readable)."""
    write_bytes_atomically(path, text.encode("utf-8"), mode=0o600)
