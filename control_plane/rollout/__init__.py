"""The rollout of each release: which release an agent is offered, stages, canaries,
halts on errors, the operators' inbox, forced updates.

offer       the offer: pin → current (everyone) → canary → previous; the canary share's hash
gate        the claim's checks: held (consumes the slot), halted / braked, forced manual updates
config      the agent's config with its own offer and hold, when it needs one
stages      canary → everyone: automatic promotion after the soak, by hand; the settings
halts       halt on errors (with the evidence and one operator notice), by hand, resume
services    RolloutService: the above for the routes and the reconcile pass; each agent's offer,
            the per-stage forecast
routes      /v1/admin/rollout…, /v1/admin/releases/{id}/promote|halt|resume|halts,
            /v1/admin/notices, /v1/admin/agents/{id}/canary|forced-update|release,
            /v1/agents/{id}/release

The routes named here live in api/routes/rollout.py, above the domains.
"""
