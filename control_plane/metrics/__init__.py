"""`GET /metrics` for operators.

services     the figures (SQL) and this replica's counters, as a `MetricsSnapshot`
trust_roots  the newest published trust root and the agents by the root they hold (also read
             by the operators' main page)
exposition   the snapshot as Prometheus text (pure)
routes       GET /metrics

The routes named here live in api/routes/metrics.py, above the domains.
"""
