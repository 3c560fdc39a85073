"""`GET /metrics` for operators.

services     the figures (SQL) and this replica's counters, as a `MetricsSnapshot`
exposition   the snapshot as Prometheus text (pure)
routes       GET /metrics

The routes named here live in api/routes/metrics.py, above the domains.
"""
