"""The pure core both programs share: time strings, wall clock -> instant, which slot is due.

(Placeholder until the planner issue lands; TIME_PATTERN is final.)
"""

from shared_planner.patterns import TIME_PATTERN

__all__ = ["TIME_PATTERN"]
