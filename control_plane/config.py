"""The control plane's settings for one process, built once from flags and environment.

Platform settings that every replica must share (time zone, catch-up window, caps) live in the
database (`services.settings`); the values here only say how this process starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from psycopg.conninfo import conninfo_to_dict

from control_plane.database import (
    DATABASE_URL_ENV,
    MAX_POOL_WAIT_SECONDS,
    MAX_REQUEST_TIMEOUT_SECONDS,
    POOL_WAIT_SECONDS,
    REQUEST_LOCK_TIMEOUT_SECONDS,
    REQUEST_STATEMENT_TIMEOUT_SECONDS,
    SessionBounds,
)
from control_plane.errors import ConfigurationError
from control_plane.notifications.addresses import WebhookAddressPolicy
from ground.whole_numbers import integer
from signed_release.errors import ReleaseError
from signed_release.keys import load_public_keys

__all__ = [
    "DATA_DIR_ENV",
    "POOL_WAIT_ENV",
    "RELEASE_KEYS_ENV",
    "REQUEST_LOCK_TIMEOUT_ENV",
    "REQUEST_STATEMENT_TIMEOUT_ENV",
    "DatabaseLocation",
    "ServeSettings",
    "default_data_dir",
    "load_trusted_keys",
    "pool_wait_seconds",
    "release_key_paths",
    "request_bounds",
    "settings_from_env",
    "webhook_policy",
]

DATA_DIR_ENV = "NACHTWACHT_DATA_DIR"
RELEASE_KEYS_ENV = "NACHTWACHT_RELEASE_PUBLIC_KEYS"
OUTBOUND_NETWORKS_ENV = "NACHTWACHT_OUTBOUND_ALLOW_NETWORKS"
# The older name of the same setting, from when only webhooks used it.
WEBHOOK_NETWORKS_ENV = "NACHTWACHT_WEBHOOK_ALLOW_NETWORKS"
POOL_WAIT_ENV = "NACHTWACHT_POOL_WAIT_SECONDS"
REQUEST_LOCK_TIMEOUT_ENV = "NACHTWACHT_REQUEST_LOCK_TIMEOUT_SECONDS"
REQUEST_STATEMENT_TIMEOUT_ENV = "NACHTWACHT_REQUEST_STATEMENT_TIMEOUT_SECONDS"

# `control serve` flags that seed the platform settings, and their environment variables.
SETTINGS_ENV = {
    "timezone": "NACHTWACHT_TIMEZONE",
    "catch_up_minutes": "NACHTWACHT_CATCH_UP_MINUTES",
    "grant_margin_seconds": "NACHTWACHT_GRANT_MARGIN_SECONDS",
    "org_cap": "NACHTWACHT_ORG_CAP",
    "global_cap": "NACHTWACHT_GLOBAL_CAP",
    "retention_days": "NACHTWACHT_RETENTION_DAYS",
}


def default_data_dir() -> Path:
    return platformdirs.user_data_path("nachtwacht") / "control-plane"


@dataclass(frozen=True, kw_only=True)
class DatabaseLocation:
    """Either an external PostgreSQL (`url`) or the embedded one in `data_dir`, never both."""

    url: str | None = None
    data_dir: Path | None = None

    def __post_init__(self) -> None:
        if (self.url is None) == (self.data_dir is None):
            raise ConfigurationError("give either a database URL or a data directory, not both")

    @classmethod
    def resolve(
        cls,
        *,
        url: str | None,
        data_dir: str | None,
        environ: Mapping[str, str] | None = None,
    ) -> DatabaseLocation:
        """Flags, then NACHTWACHT_DATABASE_URL / NACHTWACHT_DATA_DIR, then the user data dir."""
        env = os.environ if environ is None else environ
        if url is not None and data_dir is not None:
            raise ConfigurationError(
                "--database-url and --data-dir: give one "
                "(an external PostgreSQL or the embedded one)"
            )
        if url is not None:
            return cls(url=_checked_url("--database-url", url))
        if data_dir is not None:
            if not data_dir.strip():
                # Path("") is the current directory: a new, empty database would be made there.
                raise ConfigurationError(
                    "--data-dir: is empty (expected the embedded PostgreSQL's directory, e.g. "
                    "/var/lib/nachtwacht-control-plane/postgres)"
                )
            return cls(data_dir=Path(data_dir).expanduser())
        if env.get(DATABASE_URL_ENV):
            return cls(url=_checked_url(DATABASE_URL_ENV, env[DATABASE_URL_ENV]))
        if env.get(DATA_DIR_ENV):
            return cls(data_dir=Path(env[DATA_DIR_ENV]).expanduser())
        return cls(data_dir=default_data_dir())


def _checked_url(field_name: str, url: str) -> str:
    if not url.strip():
        raise ConfigurationError(f"{field_name}: is empty (expected e.g. postgresql://host/db)")
    try:
        conninfo_to_dict(url.strip())
    except psycopg.ProgrammingError as exc:
        # libpq's reason, without the URI it sometimes quotes whole: it may hold a password.
        reason = str(exc).split(' in URI: "', 1)[0].strip()
        raise ConfigurationError(
            f"{field_name}: is not a PostgreSQL connection string ({reason}); expected "
            "postgresql://USER@HOST/DATABASE or key=value pairs, e.g. 'host=HOST dbname=DATABASE'"
        ) from exc
    return url.strip()


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    database: DatabaseLocation
    migrate: bool = True
    pool_size: int = 10
    # How long a request waits for a pooled connection before it is a 503 (database down).
    pool_wait_seconds: float = POOL_WAIT_SECONDS
    # The lock and statement timeouts of the API's request connections (`database`).
    request_bounds: SessionBounds = field(default_factory=SessionBounds)
    # Worker processes over one socket; each has its own pool of `pool_size` connections.
    workers: int = 1
    log_level: str = "warning"
    # Platform settings to store at start-up (only those given).
    platform_settings: dict[str, Any] = field(default_factory=dict)
    release_public_keys: tuple[Path, ...] = ()
    # Networks webhooks may reach besides public addresses (notifications.addresses).
    webhook_policy: WebhookAddressPolicy = field(default_factory=WebhookAddressPolicy)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigurationError(f"--port: {self.port} is not a TCP port (expected 0-65535)")
        if self.workers < 1:
            raise ConfigurationError(f"--workers: {self.workers} must be at least 1")
        if self.pool_size < 1:
            raise ConfigurationError(f"--pool-size: {self.pool_size} must be at least 1")
        if not 0 < self.pool_wait_seconds <= MAX_POOL_WAIT_SECONDS:
            raise ConfigurationError(
                f"--pool-wait-seconds: {self.pool_wait_seconds} is out of range "
                f"(expected more than 0 and at most {MAX_POOL_WAIT_SECONDS:g})"
            )
        for flag, seconds in (
            ("--request-lock-timeout-seconds", self.request_bounds.lock_timeout_seconds),
            ("--request-statement-timeout-seconds", self.request_bounds.statement_timeout_seconds),
        ):
            if seconds is not None and not 0 < seconds <= MAX_REQUEST_TIMEOUT_SECONDS:
                raise ConfigurationError(
                    f"{flag}: {seconds} is out of range "
                    f"(expected more than 0 and at most {MAX_REQUEST_TIMEOUT_SECONDS:g})"
                )


def _seconds(
    flag: float | None, variable: str, default: float, most: float, environ: Mapping[str, str]
) -> float:
    """The flag's value, else the environment variable's (checked under its own name), else
    `default`."""
    if flag is not None:
        return flag
    raw = environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        seconds = float(raw)
    except ValueError as exc:
        raise ConfigurationError(
            f"{variable}: {raw!r} is not a number of seconds (e.g. {default:g})"
        ) from exc
    # Checked here too, under the name the value was given by (ServeSettings names the flag).
    if not 0 < seconds <= most:
        raise ConfigurationError(
            f"{variable}: {raw!r} is out of range (expected more than 0 and at most {most:g})"
        )
    return seconds


def pool_wait_seconds(flag: float | None, environ: Mapping[str, str] | None = None) -> float:
    """`--pool-wait-seconds`, else NACHTWACHT_POOL_WAIT_SECONDS, else `POOL_WAIT_SECONDS`."""
    env = os.environ if environ is None else environ
    return _seconds(flag, POOL_WAIT_ENV, POOL_WAIT_SECONDS, MAX_POOL_WAIT_SECONDS, env)


def request_bounds(
    lock_timeout: float | None,
    statement_timeout: float | None,
    environ: Mapping[str, str] | None = None,
) -> SessionBounds:
    """`--request-lock-timeout-seconds` and `--request-statement-timeout-seconds`, else their
    environment variables, else the defaults (`database.SessionBounds`)."""
    env = os.environ if environ is None else environ
    return SessionBounds(
        lock_timeout_seconds=_seconds(
            lock_timeout,
            REQUEST_LOCK_TIMEOUT_ENV,
            REQUEST_LOCK_TIMEOUT_SECONDS,
            MAX_REQUEST_TIMEOUT_SECONDS,
            env,
        ),
        statement_timeout_seconds=_seconds(
            statement_timeout,
            REQUEST_STATEMENT_TIMEOUT_ENV,
            REQUEST_STATEMENT_TIMEOUT_SECONDS,
            MAX_REQUEST_TIMEOUT_SECONDS,
            env,
        ),
    )


def release_key_paths(
    flags: list[str] | None, environ: Mapping[str, str] | None = None
) -> tuple[Path, ...]:
    """`--release-public-key` (repeatable), else NACHTWACHT_RELEASE_PUBLIC_KEYS (comma list)."""
    env = os.environ if environ is None else environ
    if flags:
        return tuple(Path(path).expanduser() for path in flags)
    raw = env.get(RELEASE_KEYS_ENV, "")
    return tuple(Path(part.strip()).expanduser() for part in raw.split(",") if part.strip())


def webhook_policy(
    flags: list[str] | None, environ: Mapping[str, str] | None = None
) -> WebhookAddressPolicy:
    """`--outbound-allow-network` (repeatable; `--webhook-allow-network` is its older name), else
    NACHTWACHT_OUTBOUND_ALLOW_NETWORKS, else NACHTWACHT_WEBHOOK_ALLOW_NETWORKS (commas)."""
    env = os.environ if environ is None else environ
    source = (
        OUTBOUND_NETWORKS_ENV
        if env.get(OUTBOUND_NETWORKS_ENV, "").strip()
        else WEBHOOK_NETWORKS_ENV
    )
    raw = env.get(source, "")
    texts = flags or [part for part in raw.split(",") if part.strip()]
    try:
        return WebhookAddressPolicy.allowing(texts)
    except ValueError as exc:
        # The name the operator wrote the value under: under systemd, only the variable is set.
        raise ConfigurationError(
            f"{'--outbound-allow-network' if flags else source}: {exc}"
        ) from exc


def load_trusted_keys(paths: tuple[Path, ...]) -> dict[str, Ed25519PublicKey]:
    """The release public keys by key id; a key file that cannot be used stops start-up."""
    try:
        return load_public_keys(paths)
    except ReleaseError as exc:
        # Either name: the paths came from the flag or, under systemd, from the variable.
        raise ConfigurationError(f"--release-public-key ({RELEASE_KEYS_ENV}): {exc}") from exc


def settings_from_env(
    flags: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The platform settings named by flags or, failing those, by their environment variables."""
    env = os.environ if environ is None else environ
    chosen: dict[str, Any] = {}
    for name, variable in SETTINGS_ENV.items():
        if flags.get(name) is not None:
            chosen[name] = flags[name]
        elif env.get(variable):
            raw = env[variable]
            if name == "timezone":
                chosen[name] = raw
                continue
            number = integer(raw.strip(), max_digits=100)
            if number is None:
                raise ConfigurationError(f"{variable}: {raw!r} is not a whole number")
            chosen[name] = number
    return chosen
