"""The control plane: schedules, throttle tokens within the caps, runs, events, releases, the brake.

    cli.py          `nachtwacht control …` (serve, migrate, create-org, enroll-agent, …)
    server.py       the serving process: clock, database, pool, uvicorn, clean stop
    config.py       the process's settings from flags and environment
    database.py     the embedded PostgreSQL (pgserver) or a URL; the psycopg pool
    migrate.py      Alembic, written as SQL (migrations/versions/)
    services/       the data layer: every SQL statement, each service built with pool and clock
    api/            FastAPI routes (no SQL), credentials per audience, errors as {"detail": …}
    slots.py        the server's own check of a claimed slot, with shared_planner
    errors.py       one exception tree

The HTTP contract with the agent is docs/architecture.md; how to run it is docs/control_plane.md.
"""
