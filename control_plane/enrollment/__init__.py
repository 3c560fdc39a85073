"""Enrollment tokens: short-lived secrets (`nwe_…`) a host exchanges for an agent of its own and
that agent's credential, in one command on the host.

rules.py      the bounds (uses, expiry), a new token's terms checked when built, and whether a
              use at an instant for a name is allowed (pure)
services.py   EnrollmentService: make, list, revoke (operators: any organisation; a panel: its
              own), and the exchange `POST /v1/agent/enroll` — atomic, every use and every
              refusal of a known token on the trail
"""
