"""The HTTP application: `create_app` (in `app`) puts every domain's router together.

routes/     every domain's routes, one module per domain (above the domains: they never import
            this package)
app         create_app, the server-time middleware, domain errors → status and body
deps        the caller per audience (bearer schemes), the services, the request's `now`
answers     how routes declare their error answers in OpenAPI
no_body     the dependency that refuses a body on routes that take none

This face imports nothing: `routes` import `deps` and `answers` from here, and `app` imports
every route module, so a face that handed on `create_app` would close a loop.
"""
