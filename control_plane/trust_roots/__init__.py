"""The trust roots operators publish, stored and served exactly as they were given.

services.py   TrustRootService: publish (checked to chain from the newest stored), the
              list with how many agents hold each version, the newest version, a version's
              exact bytes
unverifiable.py the live releases a root leaves unverifiable (signed by a key it does not
              name), each with how it is offered and what to do: publishing's answer names them
"""
