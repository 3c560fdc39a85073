"""Migration 0032 on the settings an installation already has: a catch-up window of one minute
(allowed before the margin) has no room for the default margin, and must not stop the upgrade."""

from __future__ import annotations

import psycopg
import pytest

from control_plane import migrate
from control_plane.migrations.versions import rev0032_grant_margin as revision


@pytest.mark.parametrize(("window", "margin"), [(1, 0), (2, 60), (15, 60)])
def test_the_upgrade_keeps_each_window_s_margin_inside_it(
    empty_database_url: str, window: int, margin: int
) -> None:
    assert revision.down_revision is not None
    migrate.upgrade(empty_database_url, revision.down_revision)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute("UPDATE platform_settings SET catch_up_minutes = %s", [window])
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT catch_up_minutes, grant_margin_seconds FROM platform_settings"
        ).fetchone()
        assert row == (window, margin)
        # The range still holds for every later write.
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE platform_settings SET grant_margin_seconds = %s", [window * 60])
