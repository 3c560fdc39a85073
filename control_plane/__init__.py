"""The control plane: schedules, throttle tokens within the caps, runs, events, releases, the brake.

One folder per domain (Warehouse's shape). Each domain's `services.py` holds all its SQL, takes
`now` as an argument (no service holds a clock) and returns frozen typed results or the
contract's models, raising the errors of `errors.py`. Its routes live in `api/routes/<domain>.py`,
above the domains: they hold no SQL, declare `response_model` and every error answer, and leave
the status to the exception handlers.

    accounts/       organisations, enrolment, the three audiences' credentials, authentication,
                    the panel's sign-in sessions (ended with their key)
    agents/         the panel's agent list, agent page and schedule (the API's time validator)
    agent_config/   GET /v1/agent/config: the contract's AgentConfig with its ETag
    settings/       the platform settings (zone, catch-up window, caps, retention; bounds from
                    ground.limits)
    brake/          the operators' emergency brake (the platform, or one release) and token
                    revocation
    releases/       publishing a signed release, the current release, the artifact's bytes
    trust_roots/    the signed trust roots operators publish (each checked to chain from the
                    one before), served to agents as given; which version each agent holds
    enrollment/     enrollment tokens (`nwe_…`): made, listed, revoked; a host exchanges one
                    for an agent and its credential (POST /v1/agent/enroll), atomically
    rollout/        which release each agent is offered (pin, stage, canary, previous), the
                    waves (canaries → 10 % → 50 % → everyone by default), halts on errors with
                    their evidence, the operators' inbox, forced updates
    pins/           pins (an organisation or agent at a version) and holds (until a date)
    claims/         throttle tokens: the slot check, the caps, the grant, refusals recorded
    runs/           nothing to do, outcomes, manual updates, the artifact download, run lists
    events/         the timeline (a scheduled update's trail is its own kind of event)
    notifications/  the per-slot body, the inbox, webhook settings and signed delivery
    forecast/       the capacity forecast per slot and per release's wave, and what publishing
                    a release reaches (pure model, service, terminal table)
    metrics/        GET /metrics: the figures and their Prometheus text
    liveness/       every serving process's marks that it is up: a window none covers was our
                    outage (`platform_unavailable`, never the agent `offline`)
    reconcile/      the worker only: leader lock, passes, missed slots, reviews, its own SQL
    restore/        the step after a restore from backup: every outstanding token revoked
    retention/      history older than `retention_days` removed by the worker in bounded
                    batches; what is kept forever
    answers_cache/  the config poll and the claim's refusal remembered per worker, exact within
                    two seconds (the change feed, migration 0011) and at once after this
                    replica's own writes

    panel/          the server-rendered panel under /panel/ (Jinja2, nine languages) and /docs
                    from local files; it reaches the domains only through panel/*backend.py
    api/            create_app: the routers (api/routes/, one module per domain), the server-time
                    middleware (the request's one clock reading), domain errors → status; callers
                    per bearer scheme
    registry.py     Services: every domain's service, built once by build_services
    agent_scope.py  whether an agent is within an organisation's reach (below every domain)
    seeded_rows.py  the one row of a table its migration inserts (settings, brake, progress)
    host_sightings.py  the one statement that notes a host answering for an agent (accounts,
                    agent_config and answers_cache each decide when one is due)
    background.py   LoopThread: the daemon thread behind the feed, the flusher and the worker
    inputs.py       free text checked before it is stored (a NUL is a 422, not a 500)
    errors.py       one exception tree
    cli.py          `nachtwacht control …` (serve, migrate, create-org, enroll-agent, …);
                    cli_credentials.py, cli_rollout.py (pin, promote, halt, resume, brake),
                    cli_trust_roots.py (trust-root publish, list) and cli_enrollment.py
                    (enrollment-token create, list, revoke) hold their families of commands,
                    cli_common.py what they share
    server.py       the serving process: clock, database, pool, uvicorn, worker, clean stop
    config.py       the process's settings from flags and environment
    database.py     the embedded PostgreSQL (pgserver) or a URL; the psycopg pool
    database_fence.py  never a demoted primary: each new connection checked against the newest
                    (system identifier, timeline) seen; a multi-host URL's newest host first
    migrate.py      Alembic, written as SQL (migrations/versions/)
    repeated_warning.py  a lasting condition said once, then at most once a period (the fence,
                    the answers' feed, requests cancelled by their bounds)
    startup.py      opening the database a command works on; ready_line.py: the "ready" line
    types.py        the pool and connection type names

Layers: ground (clock, contract, limits) → shared_planner, signed_release → this package. The
folders import each other one way (a test checks there is no circle): `api` → the domains →
`agent_scope`, `seeded_rows`, `host_sightings`, `errors`, `types`; the domains import each other
only downward (e.g. runs → claims.slots, agents → events.trail, runs.views); nothing here
imports `reconcile`, and `reconcile` imports the domains.

The HTTP contract with the agent is ground.contract and docs/architecture.md; how to run it is
docs/control_plane.md; the worker is docs/reconcile.md.
"""
