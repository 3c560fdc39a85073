"""UpdaterSettings refuse impossible values when built, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_daemon.updater.updater_settings import UpdaterSettings
from signed_release.keys import key_id


def settings(**overrides: Any) -> UpdaterSettings:
    public = Ed25519PrivateKey.generate().public_key()
    fields: dict[str, Any] = {
        "install_root": Path("/opt/provibr-agent"),
        "state_dir": Path("/var/lib/nachtwacht-agent/updater"),
        "trusted_keys": {key_id(public): public},
        "platform": "linux-x86_64",
        "channel": "stable",
        "health_command": ("/opt/provibr-agent/current/bin/provibr-agent", "health"),
    }
    fields.update(overrides)
    return UpdaterSettings(**fields)


def test_the_defaults_are_the_documented_ones() -> None:
    built = settings()
    assert built.restart_command == ("systemctl", "restart", "provibr-agent.service")
    assert built.health_deadline_seconds == 120.0
    assert built.disk_reserve_bytes == 50 * 1024 * 1024
    assert (built.download_read_timeout_seconds, built.download_deadline_seconds) == (30.0, 900.0)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        pytest.param({"health_command": ()}, "health_command", id="no_health_command"),
        pytest.param({"restart_command": ()}, "restart_command", id="no_restart_command"),
        pytest.param({"trusted_keys": {}}, "trusted_keys", id="no_trusted_key"),
        pytest.param({"health_deadline_seconds": 0}, "health_deadline_seconds", id="zero_deadline"),
        pytest.param({"download_read_timeout_seconds": -1.0}, "download_read_timeout_seconds",
                     id="negative_timeout"),
        pytest.param({"download_deadline_seconds": float("nan")}, "download_deadline_seconds",
                     id="nan_deadline"),
        pytest.param({"disk_reserve_bytes": -1}, "disk_reserve_bytes", id="negative_reserve"),
    ],
)  # fmt: skip
def test_impossible_settings_are_refused_naming_the_field(
    overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=f"^{field}: "):
        settings(**overrides)
