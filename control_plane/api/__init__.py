"""The HTTP API: panel (`/v1/agents…`), agent (`/v1/agent/…`) and operator (`/v1/admin/…`)."""

from control_plane.api.app import create_app

__all__ = ["create_app"]
