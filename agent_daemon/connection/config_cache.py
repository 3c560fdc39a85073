"""The last config the control plane sent, on disk, so the agent plans offline and `status` works.

Written atomically with a format version (`atomic_file`); read back through the contract's
`AgentConfig`, so a cache from an older agent that no longer passes today's rules is refused by
name rather than planned with.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from agent_daemon.connection.wire import parse_config, usable_etag
from agent_daemon.disk.atomic_file import read_versioned_json, write_versioned_json
from agent_daemon.errors import BadServerAnswer, DaemonStateError
from ground.contract import AgentConfig
from ground.instants import parse_instant

__all__ = ["CACHE_FORMAT_VERSION", "CachedConfig", "ConfigCache"]

CACHE_FORMAT_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class CachedConfig:
    config: AgentConfig
    raw: dict[str, Any]
    etag: str | None
    synced_at: datetime  # server time of the last answer
    offset_seconds: float


class ConfigCache:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> CachedConfig | None:
        document = read_versioned_json(self.path, format_version=CACHE_FORMAT_VERSION)
        if document is None:
            return None
        try:
            raw = document["config"]
            return CachedConfig(
                config=parse_config(raw, source=str(self.path)),
                raw=raw,
                # One a request cannot carry (damaged on disk) is dropped: a plain poll.
                etag=usable_etag(document.get("etag")),
                synced_at=parse_instant(document["synced_at"], field="synced_at"),
                offset_seconds=float(document["offset_seconds"]),
            )
        except (KeyError, TypeError, ValueError, BadServerAnswer) as exc:
            raise DaemonStateError(f"{self.path}: not a usable config cache ({exc})") from exc

    def save(self, cached: CachedConfig) -> None:
        write_versioned_json(
            self.path,
            {
                "config": cached.raw,
                "etag": cached.etag,
                "synced_at": cached.synced_at.isoformat(),
                "offset_seconds": cached.offset_seconds,
            },
            format_version=CACHE_FORMAT_VERSION,
        )
