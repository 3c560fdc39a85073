"""Alembic migrations, written as SQL. Applied by `control_plane.migrate`."""
