"""Throttle tokens: the claim of a slot within the caps, or of a manual update.

services     the hot refusal path and the decision to grant; records every refusal
decision     ClaimFacts and `refusal_for`: the claim's one pure decision, on facts read from the
             database or remembered, in the refusals' order
offered      the release a scheduled claim is judged by: offered, stopped, rolled back here
caps         the two caps per round, the round, and the counting that holds them exactly
grant        the grant transaction, in steps, and a claimed run's answer
manual       the token for a manual update: no slot, through the same caps
refused      the refusals a claim is answered with
due_facts    the claim facts of every agent due at a slot, read at once for the memory's warm-up
slots        the server's own check of a claimed slot, with shared_planner, and its grant
             margin: no new token in the window's last `grant_margin_seconds`
refusals     RefusalRecorder: refusals buffered in memory, flushed in batches
(the route, `POST /v1/agent/claims`, is in `api/routes/claims.py`)
"""
