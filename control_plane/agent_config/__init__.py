"""What an agent pulls every minute (`GET /v1/agent/config`): the contract's `AgentConfig`
with an ETag over everything but `server_time`.

    services     the SQL and the ETag
    routes       the 200 / 304 answer

The routes named here live in api/routes/agent_config.py, above the domains.
"""
