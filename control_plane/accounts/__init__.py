"""Organisations, agent enrolment and the bearer credentials of the three audiences.

services     create organisations and agents, issue keys, authenticate a caller
credentials  the audiences, secret generation and hashing (no routes: the CLI issues keys)
"""
