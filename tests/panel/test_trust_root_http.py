"""The operators' main page shows the newest trust root, its expiry (a warning within a month,
and once it has expired) and how many agents hold it, an older root or none; it and the releases
page name every release the newest root leaves unverifiable, as `/metrics` counts them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.database import open_pool
from control_plane.releases.services import ReleaseService
from tests.control_plane.root_chain import RootChain
from tests.panel.conftest import PanelWorld, sign_in_client
from tests.worlds.releases import ReleaseFactory

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

        # Signed roots, stored as publishing stores them, with the instants the figures read.
        chain = RootChain()
        with psycopg.connect(server.database_url) as conn:
            for version, body in ((1, chain.v1), (2, chain.next(chain.v1))):
                conn.execute(
                    "INSERT INTO trust_roots (version, body, expires_at, published_at,"
                    " published_by) VALUES (%s, %s, '2028-03-01T00:00:00Z', %s,"
                    " 'operator:test')",
                    [version, body, PUBLISHED],
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


def _publish_signed(
    world: PanelWorld, key: Ed25519PrivateKey, *releases: tuple[str, int, str | None]
) -> dict[str, str]:
    """Publish (version, manifest_version, stage) releases of stable/linux-x86_64 signed by
    `key`, through the real release service on the server's database: their ids by version."""
    factory = ReleaseFactory(key=key)
    pool = open_pool(world.server.database_url, min_size=1, max_size=1)
    ids = {}
    try:
        service = ReleaseService(pool, factory.trusted)
        for version, manifest_version, stage in releases:
            content = version.encode() * 100
            release = factory.sign(
                content,
                version=version,
                manifest_version=manifest_version,
                issued_at=datetime(2026, 11, 1, tzinfo=UTC),
                unpacked_size=len(content) * 2,
                expires_in=timedelta(days=365),
            )
            published = service.publish(
                release.manifest_bytes,
                release.signature,
                release.artifact,
                now=datetime(2027, 3, 26, 10, tzinfo=UTC),
                stage=stage,
            )
            ids[version] = str(published.id)
    finally:
        pool.close()
    return ids


def _publish_root(world: PanelWorld, operator_key: str, body: bytes) -> None:
    with world.client(headers={"Authorization": f"Bearer {operator_key}"}) as client:
        answer = client.post(
            "/v1/admin/trust-roots", content=body, headers={"Content-Type": "application/json"}
        )
    assert answer.status_code in (200, 201), answer.text


def _gauge(world: PanelWorld, operator_key: str) -> dict[str, str]:
    with world.client(headers={"Authorization": f"Bearer {operator_key}"}) as client:
        text = client.get("/metrics").text
    found = re.findall(
        r'^nachtwacht_unverifiable_releases\{offered_as="(\w+)"\} (\S+)$', text, re.M
    )
    return dict(found)


def _notice(html: str) -> str:
    if 'id="unverifiable-releases"' not in html:
        return ""
    start = html.index('id="unverifiable-releases"')
    return html[start : html.index("</div>", start)]


def _withdraw(world: PanelWorld, operator_key: str, release_id: str) -> None:
    with world.client(headers={"Authorization": f"Bearer {operator_key}"}) as client:
        answer = client.post(
            f"/v1/admin/releases/{release_id}/withdraw", json={"reason": "key revoked"}
        )
    assert answer.status_code == 200, answer.text


def test_releases_a_new_root_leaves_unverifiable_stay_shown_until_each_is_dealt_with(
    panel_world: PanelWorld,
) -> None:
    """Key A signed 1.4.0 and 1.5.0 (for everyone) and 1.6.0 (in its canary stage); root v2
    names only key B. Long after publishing said so, the operators' main page, the releases page
    and /metrics still show each release agents following v2 refuse, how it is offered and the
    commands; withdrawing the previous one shows the next older one as previous; signing the
    current build again with key B and withdrawing the rest leaves nothing."""
    server = panel_world.server
    operator_key = server.create_operator_key()
    chain = RootChain()
    new_key = Ed25519PrivateKey.generate()
    ids = _publish_signed(
        panel_world,
        chain.release_key,
        ("1.4.0", 41, "everyone"),
        ("1.5.0", 42, "everyone"),
        ("1.6.0", 43, None),
    )
    _publish_root(panel_world, operator_key, chain.v1)
    assert _gauge(panel_world, operator_key) == {"current": "0", "previous": "0", "stored": "0"}
    with sign_in_client(panel_world, operator_key) as client:
        assert _notice(client.get("/panel/operator").text) == ""

        _publish_root(panel_world, operator_key, chain.next(chain.v1, release_key=new_key))
        assert _gauge(panel_world, operator_key) == {
            "current": "1",
            "previous": "1",
            "stored": "1",
        }
        main = _notice(client.get("/panel/operator").text)
        assert "3 releases that are not withdrawn are signed by a release key the newest" in main
        assert "trust root (version 2) does not name" in main
        assert (
            "1.6.0 (stable / linux-x86_64) is its pair&#39;s current release: sign the"
            " same build again" in main
        )
        assert (
            "nachtwacht release sign --key release.key --version 1.6.0 --channel stable"
            " --platform linux-x86_64 --out release-1.6.0-again BUILD-1.6.0.tar.gz" in main
        )
        assert (
            "1.5.0 (stable / linux-x86_64) is offered to the agents the current"
            " release&#39;s canary rollout has not reached yet" in main
        )
        assert f"nachtwacht control promote {ids['1.6.0']} --reason" in main
        assert f"nachtwacht control withdraw-release {ids['1.5.0']} --reason" in main
        assert "1.4.0 (stable / linux-x86_64) is not its pair&#39;s current release" in main
        releases_page = client.get("/panel/operator/releases").text
        assert _notice(releases_page) == main
        for version in ("1.4.0", "1.5.0", "1.6.0"):
            row = releases_page.split(f'<tr id="release-{ids[version]}">', 1)[1].split("</tr>")[0]
            assert f'href="#unverifiable-{ids[version]}"' in row

        # The previous one withdrawn: the canary's other hosts are offered 1.4.0 now, and the
        # pages and the gauge say so at once (nothing waits for the next publish).
        _withdraw(panel_world, operator_key, ids["1.5.0"])
        assert _gauge(panel_world, operator_key) == {
            "current": "1",
            "previous": "1",
            "stored": "0",
        }
        cascaded = _notice(client.get("/panel/operator").text)
        assert "1.5.0 (stable" not in cascaded
        assert (
            "1.4.0 (stable / linux-x86_64) is offered to the agents the current"
            " release&#39;s canary rollout has not reached yet" in cascaded
        )

        # The current build signed again with key B takes its place; 1.4.0 withdrawn.
        _publish_signed(panel_world, new_key, ("1.6.0", 44, None))
        assert _gauge(panel_world, operator_key) == {
            "current": "0",
            "previous": "1",
            "stored": "0",
        }
        _withdraw(panel_world, operator_key, ids["1.4.0"])
        assert _gauge(panel_world, operator_key) == {"current": "0", "previous": "0", "stored": "0"}
        assert _notice(client.get("/panel/operator").text) == ""
        assert _notice(client.get("/panel/operator/releases").text) == ""
