"""The operators' emergency brake and single-token revocation.

services     the SQL; engaging revokes outstanding tokens (scheduled and manual, not forced)
spans        when the platform's brake was on, from the trail (the missed pass reads it)
routes       /v1/admin/brake, /v1/admin/tokens/{id}/revoke

The routes named here live in api/routes/brake.py, above the domains.
"""
