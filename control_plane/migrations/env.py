"""Alembic's environment: runs the revisions on the connection `control_plane.migrate` gives.

Each revision runs in a transaction of its own: its locks are held for that revision only. A
`migrate` that applies several releases' revisions at once would otherwise hold every table any of
them touched until the last one ends — and a replica's request that reads one of those tables
and writes another can then deadlock with it.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

connection = context.config.attributes["connection"]
# Replicas that start together each migrate: one at a time, and the later ones find nothing to do.
# A session lock, held across the revisions' transactions; it ends with the connection.
connection.execute(text("SELECT pg_advisory_lock(hashtext('nachtwacht.migrations'))"))
# Only then a bound on each lock a statement waits for: a table in use by a long query makes the
# revision give up (rolled back, with those after it) instead of queueing every other query of
# that table behind it. `control_plane.migrate` passes it.
lock_timeout_ms = context.config.attributes.get("lock_timeout_ms")
if lock_timeout_ms is not None:
    connection.execute(text(f"SET lock_timeout = {int(lock_timeout_ms)}"))
# The statements above began a transaction; the revisions each begin their own.
connection.commit()
context.configure(
    connection=connection,
    target_metadata=None,
    transactional_ddl=True,
    transaction_per_migration=True,
)
with context.begin_transaction():
    context.run_migrations()
