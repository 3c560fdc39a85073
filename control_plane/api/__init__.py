"""The HTTP application: `create_app` puts every domain's router together.

app         create_app, the server-time middleware, domain errors → status and body
deps        the caller per audience (bearer schemes), the services, the request's `now`
answers     how routes declare their error answers in OpenAPI
"""

from control_plane.api.app import create_app

__all__ = ["create_app"]
