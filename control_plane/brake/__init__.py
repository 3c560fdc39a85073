"""The operators' emergency brake (DESIGN.md rule 10) and single-token revocation.

services     the SQL; engaging revokes outstanding scheduled tokens
routes       /v1/admin/brake, /v1/admin/tokens/{id}/revoke
"""
