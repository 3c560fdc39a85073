"""How a route answers a request that records a run and may be asked again: the run it wrote
answers with the route's own status (201, 202), the run found written by the same request asked
before answers 200 — the same run either way, so asking twice never files two."""

from __future__ import annotations

from starlette.responses import Response

from control_plane.runs.services import RecordedRun
from control_plane.runs.views import RunView

__all__ = ["recorded_run"]


def recorded_run(recorded: RecordedRun, response: Response) -> RunView:
    """`recorded`'s run; `response` answers 200 when the run was already there."""
    if not recorded.created:
        response.status_code = 200
    return recorded.run
