"""The rollout of each release: which release an agent is offered, stages, canaries,
halts on errors, the operators' inbox, forced updates.

offer       the offer: pin → current (everyone) → canary (the waves so far) → previous; the
            share's hash; one rule for one agent or a whole list (each agent's facts read in
            one query, the releases in a few)
kept_offers every agent's offer kept in `agent_offers`, recomputed (by `offer`) for the agents
            a write marked stale; what the fleet's views read
gate        the claim's checks: held (consumes the slot), halted / braked, forced manual updates
config      the agent's config with its own offer and hold, when it needs one
waves       the plan of waves (shares, canaries, soak and threshold each), the default's reasons
stages      a release's wave and stage: promotion after each wave's soak, by hand; the settings
halts       halt on errors (with the evidence and one operator notice), by hand, resume
unverifiable the live releases a new trust root leaves unverifiable (current, previous or
            stored), with what to do: named when the root is published
services    RolloutService: the above for the routes and the reconcile pass; each agent's offer,
            the per-stage forecast
routes      /v1/admin/rollout…, /v1/admin/releases/{id}/promote|halt|resume|halts,
            /v1/admin/notices, /v1/admin/agents/{id}/canary|forced-update|release,
            /v1/admin/orgs/{id}/canary,
            /v1/agents/{id}/release

The routes named here live in api/routes/rollout.py, above the domains.
"""
