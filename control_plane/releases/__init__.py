"""Signed releases: publishing (verified against the pinned keys) and serving the artifact.

services     publish, the current release, the artifact in slices, contract views
routes       POST /v1/admin/releases
"""
