"""The panel's agents: the list, the agent page (next slot, latest runs) and the schedule.

services     the SQL (`require_agent` is in control_plane/agent_scope.py)
agent_list   a page of the list found, filtered, sorted and cut in SQL; one schedule for many
default_schedule   an organisation's schedule for its new agents (copied at enrolment)
schedule     the API layer of the time pattern's rules: the planner's rules as a 422
routes       /v1/agents, /v1/agents/{id}, /v1/agents/{id}/schedule, /v1/default-schedule
host_routes  what an agent asks for on its host's behalf: a manual update (`agent update-now`)
fleet        the whole fleet, one query each: agents per (pair, version), organisations' names

The routes named here live in api/routes/agents.py and agents_host.py, above the domains.
"""
