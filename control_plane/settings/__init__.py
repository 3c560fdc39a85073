"""The platform settings (zone, catch-up window, caps): one row, bounds from `ground.limits`.

services     `PlatformSettings` (validated when built), `read_settings`, the update
routes       /v1/admin/settings

The routes named here live in api/routes/settings.py, above the domains.
"""
