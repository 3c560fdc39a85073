"""Signed releases: publishing (verified against the pinned keys) and serving the artifact.

services     publish (a downgrade only when marked), the current release of a (channel,
             platform), the artifact in slices, contract views
withdrawal   withdrawing a release (pointer moved, tokens revoked), the list per pair
rollback     rolling a pair back to an older build through a signed downgrade release
stored_bytes an artifact's or a patch's bytes by range, a slice at a time
routes       POST/GET /v1/admin/releases, POST /v1/admin/releases/{id}/withdraw,
             POST /v1/admin/releases/rollback

The routes named here live in api/routes/releases.py, above the domains.
"""
