"""`GET /metrics` for operators.

services     the figures (SQL) and this replica's counters, as a `MetricsSnapshot`
exposition   the snapshot as Prometheus text (pure)
routes       GET /metrics
"""
