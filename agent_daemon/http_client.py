"""The agent's one `httpx.Client`, built in one place (STYLE.md: one seam per I/O dependency).

Tests and benchmarks pass a `transport=` to stand in for the control plane.
"""

from __future__ import annotations

import httpx

__all__ = ["USER_AGENT", "build_http_client"]

USER_AGENT = "nachtwacht-agent"


def build_http_client(
    *,
    base_url: str,
    credential: str,
    timeout_seconds: float,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    """`timeout_seconds` is real time (the caller converts product seconds with its clock)."""
    return httpx.Client(
        base_url=base_url,
        headers={"Authorization": f"Bearer {credential}", "User-Agent": USER_AGENT},
        timeout=httpx.Timeout(timeout_seconds),
        transport=transport,
        # A redirect would carry the credential somewhere the config did not name.
        follow_redirects=False,
    )
