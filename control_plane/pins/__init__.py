"""Pins and holds.

holds       one agent's hold until a date (its host, its customer, an operator); bounds
services    PinService: pins per organisation or agent, holds with their scope checks
routes      HOLD_PATH (the host), /v1/agents/{id}/hold (customer), /v1/admin/…/pin|hold

The routes named here live in api/routes/pins.py, above the domains.
"""
