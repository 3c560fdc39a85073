"""The operators' main page shows the newest trust root, its expiry (a warning within a month,
and once it has expired) and how many agents hold it, an older root or none."""

from __future__ import annotations

import psycopg

from tests.panel.conftest import PanelWorld, sign_in_client

# The panel's clock shows 2027-03-26 11:00 UTC.
PUBLISHED = "2027-03-01T10:00:00Z"


def _trust_root_section(html: str) -> str:
    start = html.index('<section aria-labelledby="trust-root-heading">')
    return html[start : html.index("</section>", start)]


def _count(section: str, label: str) -> str:
    return section.split(f'<th scope="row">{label}</th><td>', 1)[1].split("</td>", 1)[0]


def _set_expiry(world: PanelWorld, expires: str) -> None:
    with psycopg.connect(world.server.database_url) as conn:
        conn.execute("UPDATE trust_roots SET expires_at = %s WHERE version = 2", [expires])


def test_the_operator_sees_the_trust_root_its_expiry_and_the_agents_behind_it(
    panel_world: PanelWorld,
) -> None:
    server = panel_world.server
    key = server.create_operator_key()
    newer = server.enroll_agent(panel_world.org_id, "web-02")
    server.enroll_agent(panel_world.org_id, "web-03")
    with sign_in_client(panel_world, key) as client:
        before = _trust_root_section(client.get("/panel/operator").text)
        assert "No trust root is published yet" in before
        assert _count(before, "Agents without a root (on their key files)") == "3"

        # The figures read the table only: placeholder bodies stand in for signed roots.
        with psycopg.connect(server.database_url) as conn:
            for version in (1, 2):
                conn.execute(
                    "INSERT INTO trust_roots (version, body, expires_at, published_at,"
                    " published_by) VALUES (%s, '\\x7b7d', '2028-03-01T00:00:00Z', %s,"
                    " 'operator:test')",
                    [version, PUBLISHED],
                )
            conn.execute(
                "UPDATE agents SET trust_root_version = 1 WHERE id = %s", [panel_world.agent_id]
            )
            conn.execute(
                "UPDATE agents SET trust_root_version = 2 WHERE id = %s", [newer["agent_id"]]
            )
        far = _trust_root_section(client.get("/panel/operator").text)
        assert "<p>Version 2, valid until Mar 1, 2028" in far
        assert 'class="warning"' not in far
        assert _count(far, "Agents on this root") == "1"
        assert _count(far, "Agents on an older root") == "1"
        assert _count(far, "Agents without a root (on their key files)") == "1"

        # Twenty-nine days left: a warning.
        _set_expiry(panel_world, "2027-04-24T11:00:00Z")
        soon = _trust_root_section(client.get("/panel/operator").text)
        assert '<p class="warning">Version 2 expires on Apr 24, 2027' in soon

        # A month and a day left: no warning yet.
        _set_expiry(panel_world, "2027-04-26T11:00:00Z")
        month = _trust_root_section(client.get("/panel/operator").text)
        assert "<p>Version 2, valid until Apr 26, 2027" in month

        _set_expiry(panel_world, "2027-03-25T11:00:00Z")
        expired = _trust_root_section(client.get("/panel/operator").text)
        assert '<p class="warning">Version 2 expired on Mar 25, 2027' in expired
        assert "agents accept no release until its successor is published" in expired


def test_the_trust_root_is_worded_in_the_readers_language(panel_world: PanelWorld) -> None:
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as client:
        client.get("/panel/language/de", params={"next": "/panel/operator"})
        section = _trust_root_section(client.get("/panel/operator").text)
    assert "Vertrauensanker" in section
    assert "Trust root" not in section
