"""Organisations, agent enrolment and the bearer credentials of the three audiences.

services     create organisations and agents, issue keys, authenticate a caller; the panel's
             sign-in sessions (`SessionService`: opened with a key, ended with it)
credentials  the audiences, secret generation and hashing (no routes: the CLI issues keys)
"""
