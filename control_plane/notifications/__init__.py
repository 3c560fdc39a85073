"""Notifications (DESIGN.md rule 11): the per-slot body, the inbox, the webhook settings and
the signed webhook delivery.

    summary      the body of one organisation's notification for one slot (pure)
    services     the inbox, `write_notification` (the worker's review calls it), webhook settings
    delivery     signing, verification and delivery with retries (the worker sends)
    routes       /v1/notifications…, /v1/webhook
"""
