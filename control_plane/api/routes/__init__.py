"""Every domain's HTTP routes, one module per domain; `api.app` puts them together.

A route holds no SQL: it reads the caller and the request's `now` (`api.deps`), calls its domain's
service, declares `response_model` and every error answer (`api.answers`), and leaves the status
to the exception handlers. The routes live here, above the domains, so the domains never import
the HTTP layer: the arrows run api → domains only.

    accounts        credentials, enrolment, sign-in (the three audiences)
    agent_config    GET /v1/agent/config with its ETag
    agents          the panel's agent list, agent page and schedule
    agents_host     the host's own verbs (hold, manual update) under its agent key
    brake           the operators' brake and token revocation
    claims          POST /v1/agent/claims: the throttle token
    enrollment      enrollment tokens (operators', a customer's own) and the host's exchange
    events          the timeline
    forecast        the capacity forecast per slot
    metrics         GET /metrics
    notifications   the inbox, webhook settings and deliveries
    pins            pins and holds
    releases        publishing, the current release, withdrawal
    rollout         stages, halts, the operators' inbox, forced updates
    runs            outcomes, nothing to do, manual updates, the artifact, run lists
    settings        the platform settings
"""
