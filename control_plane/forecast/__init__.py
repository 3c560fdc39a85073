"""The capacity forecast: which slots of a local day will not fit the caps.

model        the arithmetic and the day's views (pure; the herd benchmark uses it)
services     the SQL, `parse_day`
releases     how many agents get each pair's current release on a night at each wave, within
             the caps (the offers are the rollout's own rule); what a release just published
             reaches in the next day
round_bytes  the bytes each organisation's next round downloads: patches from the versions
             its agents reported, else full builds, within one round of the caps
schedule_slots  each row of agents with its schedule's slot, each schedule planned once
text         the terminal table of `nachtwacht control forecast`, the publish outlook's lines
routes       /v1/admin/forecast, /v1/forecast

The routes named here live in api/routes/forecast.py, above the domains.
"""
