"""Once a trust root is published, a release is checked against the root's release keys — the
keys every agent following the root accepts — not the keys the control plane was configured with."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.errors import InvalidInput
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from signed_release.keys import key_id
from tests.control_plane.conftest import sign_release
from tests.control_plane.root_chain import RootChain
from tests.worlds.clocks import ManualClock

OPERATOR = Actor(kind="operator", name="tests")


def _releases(pool: Pool) -> int:
    with pool.connection() as conn:
        row = conn.execute("SELECT count(*) AS n FROM releases").fetchone()
    assert row is not None
    return int(row["n"])


def test_a_release_signed_by_a_key_the_root_does_not_name_is_refused(
    services: Services, pool: Pool, release_key: Ed25519PrivateKey, clock: ManualClock
) -> None:
    """The configured key signed it, but the root names another: agents would refuse it."""
    chain = RootChain()
    services.trust_roots.publish(chain.v1, now=clock.now(), actor=OPERATOR)
    refused = sign_release(release_key)
    with pytest.raises(InvalidInput, match="trust root v1 does not name") as caught:
        services.releases.publish(
            refused.manifest, refused.signature, refused.artifact, now=clock.now()
        )
    assert key_id(release_key.public_key()) in str(caught.value)
    assert _releases(pool) == 0
    accepted = sign_release(chain.release_key)  # a key the control plane was never configured with
    published = services.releases.publish(
        accepted.manifest, accepted.signature, accepted.artifact, now=clock.now()
    )
    assert (published.version, _releases(pool)) == ("1.5.0", 1)


def test_a_key_the_next_root_drops_signs_no_new_release(
    services: Services, pool: Pool, clock: ManualClock
) -> None:
    chain = RootChain()
    services.trust_roots.publish(chain.v1, now=clock.now(), actor=OPERATOR)
    successor = Ed25519PrivateKey.generate()
    services.trust_roots.publish(
        chain.next(chain.v1, release_key=successor), now=clock.now(), actor=OPERATOR
    )
    revoked = sign_release(chain.release_key)
    with pytest.raises(InvalidInput, match="trust root v2 does not name"):
        services.releases.publish(
            revoked.manifest, revoked.signature, revoked.artifact, now=clock.now()
        )
    assert _releases(pool) == 0
