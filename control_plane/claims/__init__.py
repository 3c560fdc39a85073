"""Throttle tokens: the claim of a slot within the caps, or of a manual update (rules 8-10).

services     the hot refusal path and the grant; records every refusal
slots        the server's own check of a claimed slot, with shared_planner; rounds
refusals     RefusalRecorder: refusals buffered in memory, flushed in batches
routes       POST /v1/agent/claims
"""
