"""The agent's one `httpx.Client`, built in one place (STYLE.md: one seam per I/O dependency).

Tests and benchmarks pass a `transport=` to stand in for the control plane.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx

from ground.contract import HOST_ID_HEADER

__all__ = ["USER_AGENT", "build_http_client", "local_host_id"]

USER_AGENT = "nachtwacht-agent"

_MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))


def local_host_id(files: tuple[Path, ...] = _MACHINE_ID_FILES) -> str | None:
    """A stable id of this host for `HOST_ID_HEADER`, or None when the host has none.

    Derived from the machine id (systemd's, stable across reboots) by a hash, so the control
    plane learns that two hosts differ without learning either machine id."""
    for path in files:
        try:
            machine_id = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if machine_id:
            return hashlib.sha256(f"nachtwacht-host:{machine_id}".encode()).hexdigest()[:32]
    return None


def build_http_client(
    *,
    base_url: str,
    credential: str,
    timeout_seconds: float,
    transport: httpx.BaseTransport | None = None,
    host_id: str | None = None,
) -> httpx.Client:
    """`timeout_seconds` is real time (the caller converts product seconds with its clock).
    `host_id` defaults to `local_host_id()`; without one no host id is sent."""
    headers = {"Authorization": f"Bearer {credential}", "User-Agent": USER_AGENT}
    chosen = host_id or local_host_id()
    if chosen is not None:
        # Lets the control plane see one credential answered from two hosts (issue 12).
        headers[HOST_ID_HEADER] = chosen
    return httpx.Client(
        base_url=base_url,
        headers=headers,
        timeout=httpx.Timeout(timeout_seconds),
        transport=transport,
        # A redirect would carry the credential somewhere the config did not name.
        follow_redirects=False,
    )
