"""The trust roots operators publish, stored and served exactly as they were given.

services.py   TrustRootService: publish (checked to chain from the newest stored), the
              list with how many agents hold each version, the newest version, a version's
              exact bytes
unverifiable.py what publishing's answer says of each live release the root leaves
              unverifiable (found by `control_plane.rollout.unverifiable`)
"""
