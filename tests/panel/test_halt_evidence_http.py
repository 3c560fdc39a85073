"""The operators' pages show a halt's evidence by name (real control plane, real HTTP): the
releases page lists each tripping run's agent, organisation, versions, outcome and reason; the
notices inbox the same for the agents the notice names, and how many more. Names are escaped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from control_plane.database import open_pool
from control_plane.rollout.halts import NOTICE_AGENTS_SHOWN
from control_plane.rollout.services import RolloutService
from tests.panel.conftest import PanelWorld, sign_in_client
from tests.panel.operator_support import publish_releases
from tests.panel.test_rollout_http import NOW, _release_ids, _row

HOSTILE_ORG = "Bravo & <b>Co</b>"
HOSTILE_AGENT = "<script>alert(1)</script>"


def _fail(world: PanelWorld, release_id: str, agent_ids: list[str], org_id: str) -> None:
    """One failed run (from 1.4.0, install failed) per agent, then the reconcile step halts."""
    with psycopg.connect(world.server.database_url) as conn:
        for n, agent_id in enumerate(agent_ids):
            conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
                " from_version, version, release_id, outcome_reason, created_at, finished_at)"
                " VALUES (%s, %s, 'schedule', '2027-03-26T03:00', %s, 'failed', '1.4.0', '1.4.0',"
                " %s, 'install_failed', %s, %s)",
                [
                    agent_id,
                    org_id,
                    datetime(2027, 3, 26, 2, tzinfo=UTC),
                    release_id,
                    NOW - timedelta(hours=2),
                    NOW - timedelta(minutes=90 - n),
                ],
            )
    pool = open_pool(world.server.database_url, min_size=1, max_size=1)
    try:
        assert RolloutService(pool).advance(NOW).halts
    finally:
        pool.close()


def test_the_halt_names_its_agents_on_the_releases_page_and_in_the_notice(
    panel_world: PanelWorld,
) -> None:
    publish_releases(panel_world, ("1.4.0", 1), ("1.5.0", 2))
    release_id = _release_ids(panel_world)["1.5.0"]
    org = panel_world.server.create_org(HOSTILE_ORG)
    agents = [panel_world.server.enroll_agent(org["org_id"], HOSTILE_AGENT)["agent_id"]]
    agents += [
        panel_world.server.enroll_agent(org["org_id"], f"edge-{n:02d}")["agent_id"]
        for n in range(NOTICE_AGENTS_SHOWN + 1)
    ]
    _fail(panel_world, release_id, agents, org["org_id"])
    line = (
        "&lt;script&gt;alert(1)&lt;/script&gt; (Bravo &amp; &lt;b&gt;Co&lt;/b&gt;):"
        " from 1.4.0 to 1.5.0, failed: {reason}</li>"
    )
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        row = _row(client, release_id)
        assert line.format(reason="the new version could not be installed") in row, row
        assert HOSTILE_AGENT not in row and "<b>Co</b>" not in row
        # The release's own evidence lists every run; the notice names ten and counts the rest.
        assert row.count('<li id="halt-run-') == len(agents)
        inbox = client.get("/panel/operator/notices").text
        assert inbox.count('<li id="halt-run-') == NOTICE_AGENTS_SHOWN
        assert "and 2 more agents" in inbox
        assert HOSTILE_AGENT not in inbox

        client.get("/panel/language/nl", params={"next": "/panel/operator/notices"})
        dutch = client.get("/panel/operator/notices").text
        assert "(Bravo &amp; &lt;b&gt;Co&lt;/b&gt;): van 1.4.0 naar 1.5.0, mislukt: " in dutch
        assert "en nog 2 agents" in dutch
