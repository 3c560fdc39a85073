"""Run rows after the claim: nothing to do, outcomes, manual updates, the artifact download and
the panel's run lists and task tray.

    services     the SQL
    views        how a run reads (`RunView`) and the queries that read it so
    ranges       `Range` / `If-Range` for the download
    routes       /v1/agent/runs…, /v1/agents/{id}/runs, /v1/agents/{id}/update, /v1/operations
"""
