"""Alembic's environment: runs the revisions on the connection `control_plane.migrate` gives."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

connection = context.config.attributes["connection"]
# Replicas that start together each migrate: one at a time, and the later ones find nothing to do.
connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('nachtwacht.migrations'))"))
context.configure(connection=connection, target_metadata=None, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
