"""Feature probes for end-to-end tests whose other half is built in parallel.

`CONFIRM_ROUTE_MISSING`: this checkout's control plane has no `POST confirm_path(run_id)` yet (its
side of the swap's confirmation). Without it an agent never switches — only a `SwapPermit` allows
it — so every end-to-end test that expects a switch is marked `needs_confirm_route` and runs by
itself once the route is in the app's OpenAPI (built here without a database).
"""

from __future__ import annotations

import pytest

from control_plane.api.app import create_app
from ground.clock import SystemClock
from ground.contract import confirm_path

__all__ = ["CONFIRM_ROUTE_MISSING", "needs_confirm_route"]


def _confirm_route_missing() -> bool:
    paths = create_app(None, SystemClock()).openapi()["paths"]  # type: ignore[arg-type]
    return confirm_path("{run_id}") not in paths


CONFIRM_ROUTE_MISSING = _confirm_route_missing()

needs_confirm_route = pytest.mark.skipif(
    CONFIRM_ROUTE_MISSING,
    reason="the control plane in this checkout has no POST /v1/agent/runs/{run_id}/confirm yet "
    "(its side of the swap's confirmation); without a swap permit no agent switches",
)
