"""Notifications: the per-slot body, the inbox, the webhook settings and the signed delivery.

    summary      the body of one organisation's notification for one slot (pure)
    services     the inbox, `write_notification` (the worker's review calls it), webhook settings
    delivery     signing, verification and delivery with retries (the worker sends)
    trial_delivery  one signed POST now, asked for in the panel ("send a test delivery")
    addresses    the address policy every delivery keeps to, and the pinned request
                 (`pinned_send`); an organisation's OpenID Connect provider is asked under it
                 too (`accounts.oidc`)
    routes       /v1/notifications…, /v1/webhook

The routes named here live in api/routes/notifications.py, above the domains.
"""
