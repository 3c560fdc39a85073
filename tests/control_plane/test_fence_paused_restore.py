"""A point-in-time restore that has not finished replaying is fenced like a finished one.

A server replaying towards its recovery target already takes (read-only) connections; a replica
that reconnected then, if admitted, would name its session and keep it through the promotion —
using the restored database before `nachtwacht control after-restore` revoked what it still
holds. Here the restore is paused at its target (`recovery_target_action = 'pause'`), so the
server stays in that state for as long as the test needs.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import dict_row

from control_plane import migrate
from control_plane.database_fence import DatabaseFence, FencedServer, read_position
from control_plane.replica_sessions import connected_replicas, replica_session_name
from tests.worlds.replicated_postgres import ArchivedPrimary, PostgresNode, archived_primary
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

RESTORE_POINT = "before-the-mistake"
# A deadline for a failure, not a speed expectation.
DEADLINE_SECONDS = 60.0


@pytest.fixture
def servers() -> Iterator[ArchivedPrimary]:
    with archived_primary() as servers:
        yield servers


def _paused(node: PostgresNode) -> bool:
    try:
        with psycopg.connect(node.url, connect_timeout=2) as conn:
            row = conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()
    except psycopg.OperationalError:
        return False  # still starting
    return row is not None and row[0] == "paused"


def test_a_restore_paused_at_its_target_is_fenced_until_after_restore(
    servers: ArchivedPrimary,
) -> None:
    primary = servers.primary
    migrate.upgrade(primary.url)
    # A replica that served on the primary remembers where its cluster stands.
    remembered = DatabaseFence(primary.url)
    remembered.connect().close()
    backup = servers.home / "backup"
    servers.base_backup(backup)
    with psycopg.connect(primary.url, autocommit=True) as conn:
        conn.execute("SELECT pg_create_restore_point(%s)", [RESTORE_POINT])
    servers.archive_current_wal()
    servers.kill(primary)

    # The restore, on the old primary's address, paused once it reaches its target.
    restored = PostgresNode("restored", servers.home / "restored", primary.port)
    servers.restore(
        backup,
        restored,
        settings={"recovery_target_name": RESTORE_POINT, "recovery_target_action": "pause"},
    )
    wait_until(
        lambda: _paused(restored),
        what="the restore paused at its target",
        timeout=DEADLINE_SECONDS,
    )
    with psycopg.connect(restored.url) as conn:
        position = read_position(conn)
    assert position.standby
    assert position.recovery_target == f"recovery_target_name = '{RESTORE_POINT}'"

    # Neither that replica nor one that never saw the cluster is let in.
    for fence in (remembered, DatabaseFence(restored.url)):
        with pytest.raises(FencedServer, match="`nachtwacht control after-restore` has not run"):
            fence.connect(application_name=replica_session_name("test"))
    with psycopg.connect(restored.url, row_factory=dict_row) as conn:
        assert connected_replicas(conn).sessions == 0
