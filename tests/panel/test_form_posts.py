"""Every form the panel accepts, walked from the routers themselves, against a real control plane:
the checks `readers.customer_post` / `operator_post` make before anything changes — no session
(sign in), the other audience (not found), a malformed id in the path (not found), a forged CSRF
token (refused) — and that none of these attempts changed a row."""

from __future__ import annotations

import re
from uuid import uuid4

import psycopg
from fastapi.routing import APIRoute
from psycopg import sql

from control_plane.panel import (
    credential_routes,
    customer_routes,
    enrollment_routes,
    hold_routes,
    operator_routes,
    progress_routes,
    release_routes,
    rollout_routes,
)
from tests.panel.conftest import PanelWorld, sign_in_client

ROUTERS = (
    customer_routes,
    enrollment_routes,
    hold_routes,
    progress_routes,
    operator_routes,
    release_routes,
    credential_routes,
    rollout_routes,
)
# Every action a multi-action form offers is one it knows; the walk sends the first it accepts.
ACTIONS = {"/rollout": "promote", "/orgs/{org_id}/agents/{agent_id}": "canary"}


def _posts() -> list[str]:
    paths = []
    for module in ROUTERS:
        for route in module.router.routes:
            if isinstance(route, APIRoute) and "POST" in route.methods:
                paths.append(route.path)
    return sorted(set(paths))


POSTS = _posts()


def _filled(path: str, value: str) -> str:
    return re.sub(r"\{[a-z_]+\}", value, path)


def _form(path: str) -> dict[str, str]:
    for end, action in ACTIONS.items():
        if path.endswith(end):
            return {"action": action, "reason": "walk"}
    return {}


def _counts(world: PanelWorld) -> tuple[int, ...]:
    counts = []
    with psycopg.connect(world.server.database_url) as conn:
        for table in (
            "events",
            "runs",
            "credentials",
            "holds",
            "pins",
            "canary_agents",
            "enrollment_tokens",
        ):
            row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
            counts.append(row.fetchone()[0])  # type: ignore[index]
    return tuple(counts)


def test_the_walk_finds_the_forms() -> None:
    # A walk over nothing would pass; the panel has at least these forms.
    assert len(POSTS) >= 15
    assert "/panel/agents/{agent_id}/hold" in POSTS
    assert "/panel/operator/credentials/{credential_id}/revoke" in POSTS
    assert "/panel/enrollment/{token_id}/revoke" in POSTS


def test_every_form_post_checks_session_audience_id_and_token_before_it_changes_anything(
    panel_world: PanelWorld,
) -> None:
    operator_key = panel_world.server.create_operator_key()
    before = _counts(panel_world)
    some_id = str(uuid4())
    customer_paths = [p for p in POSTS if not p.startswith("/panel/operator")]
    operator_paths = [p for p in POSTS if p.startswith("/panel/operator")]
    # No session: back to the sign-in page.
    with panel_world.client() as anonymous:
        for path in POSTS:
            answer = anonymous.post(_filled(path, some_id), data={"csrf": "x", **_form(path)})
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/panel/sign-in"), path
    for key, own, others in (
        (panel_world.panel_key, customer_paths, operator_paths),
        (operator_key, operator_paths, customer_paths),
    ):
        with sign_in_client(panel_world, key) as client:
            for path in others:  # the other audience's forms do not exist for this reader
                answer = client.post(_filled(path, some_id), data={"csrf": "x", **_form(path)})
                assert answer.status_code == 404, path
            for path in own:
                if "{" in path:
                    malformed = client.post(
                        _filled(path, "not-an-id"), data={"csrf": "x", **_form(path)}
                    )
                    assert malformed.status_code == 404, path
                forged = client.post(_filled(path, some_id), data={"csrf": "x", **_form(path)})
                assert forged.status_code == 403, (path, forged.status_code)
            for path in [p for p in own if p.endswith(tuple(ACTIONS))]:
                # An action the form does not offer is not found either.
                unknown = {"csrf": "x", "action": "explode", "reason": "x"}
                assert client.post(_filled(path, some_id), data=unknown).status_code == 404, path
    # Signing in wrote its own rows (sessions live elsewhere); the forms wrote nothing.
    assert _counts(panel_world) == before
