"""Alembic's environment: runs the revisions on the connection `control_plane.migrate` gives."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

connection = context.config.attributes["connection"]
# Replicas that start together each migrate: one at a time, and the later ones find nothing to do.
connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('nachtwacht.migrations'))"))
# Only then a bound on each lock a statement waits for: a table in use by a long query makes the
# migration give up (rolled back whole) instead of queueing every other query of that table
# behind it. `control_plane.migrate` passes it.
lock_timeout_ms = context.config.attributes.get("lock_timeout_ms")
if lock_timeout_ms is not None:
    connection.execute(text(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}"))
context.configure(connection=connection, target_metadata=None, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
