"""The HTTP application: `create_app` (in `app`) puts every domain's router together.

app         create_app, the server-time middleware, domain errors → status and body
deps        the caller per audience (bearer schemes), the services, the request's `now`
answers     how routes declare their error answers in OpenAPI

This face imports nothing: every domain's routes import `deps` and `answers` from here, and
`app` imports every domain's routes, so a face that handed on `create_app` would close a loop.
"""
