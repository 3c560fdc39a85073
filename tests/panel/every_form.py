"""The panel's forms as the attackers' passes reach them: every POST route, found from the panel's
own routers (a form added later is covered too), an address for each, and the state a form may
change, read so that "nothing changed" can be asserted."""

from __future__ import annotations

import re
import uuid

import psycopg

from control_plane.panel import ROUTERS
from tests.panel.conftest import PanelWorld

__all__ = ["STATE_QUERIES", "address", "panel_state", "post_routes"]

# Every table a form writes to, counted, and the rows a form changes in place, read whole.
STATE_QUERIES = (
    "SELECT count(*) FROM events",
    "SELECT count(*) FROM holds",
    "SELECT count(*) FROM runs",
    "SELECT count(*) FROM credentials WHERE revoked_at IS NULL",
    "SELECT count(*) FROM enrollment_tokens",
    "SELECT count(*) FROM panel_sessions",
    "SELECT string_agg(id::text || update_schedule_enabled::text || update_schedule_times::text,"
    " ',' ORDER BY id) FROM agents",
    "SELECT string_agg(to_jsonb(s)::text, ',') FROM platform_settings s",
)


def panel_state(world: PanelWorld) -> list[object]:
    with psycopg.connect(world.server.database_url) as conn:
        return [conn.execute(query).fetchone() for query in STATE_QUERIES]


def post_routes() -> list[str]:
    return sorted(
        {
            route.path
            for router in ROUTERS
            for route in router.routes
            if "POST" in (getattr(route, "methods", None) or ())
        }
    )


def address(pattern: str, ids: dict[str, str]) -> str:
    """`pattern` with its `{names}` filled from `ids`, or with an id that exists nowhere."""
    return re.sub(r"\{([^}:]+)\}", lambda name: ids.get(name[1], str(uuid.uuid4())), pattern)
