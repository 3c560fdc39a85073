"""The revisions, in order: 0001 orgs, agents, credentials; 0002 the update schedule (alone)."""
