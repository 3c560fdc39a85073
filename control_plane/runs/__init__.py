"""Run rows after the claim: nothing to do, outcomes, manual updates, the artifact download and
the panel's run lists and task tray.

    services     the SQL
    authority    what a claimed run's lease authorises: the swap permit, switches judged
    current_version  what an agent runs, moved only by a report newer than the one that set it
    outcomes     an agent's report of how a run ended, recorded as what it is (`unauthorised`)
    views        how a run reads (`RunView`) and the queries that read it so
    ranges       `Range` / `If-Range` for the download
    routes       /v1/agent/runs… (…/confirm too), /v1/agents/{id}/runs, /v1/agents/{id}/update,
                 /v1/operations, /v1/admin/agents/{id}/retry-release

The routes named here live in api/routes/runs.py, above the domains.
"""
