"""The timeline: one event per step of a run, with its actor.

services     `record_event` (used inside other domains' transactions), the agent's timeline
routes       /v1/agents/{id}/events

The routes named here live in api/routes/events.py, above the domains.
"""
