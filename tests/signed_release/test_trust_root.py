"""The trust root's rules against TUF's root-rotation attacks, with real keys and signatures."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signed_release.errors import (
    TrustRootChainTooLong,
    TrustRootExpired,
    TrustRootGap,
    TrustRootMalformed,
    TrustRootRollback,
    TrustRootThreshold,
)
from signed_release.keys import key_id
from signed_release.trust_root import (
    MAX_ROOT_STEPS,
    TrustRoot,
    first_trust_root,
    new_trust_root,
    next_trust_root,
    read_trust_root,
    self_signed_root,
    sign_trust_root,
    successor_root,
    walk_trust_roots,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
YEAR = NOW + timedelta(days=365)


def _keys(count: int) -> list[Ed25519PrivateKey]:
    return [Ed25519PrivateKey.generate() for _ in range(count)]


def _signed(data: bytes, keys: Sequence[Ed25519PrivateKey]) -> bytes:
    for key in keys:
        data = sign_trust_root(data, key)
    return data


class Chain:
    """Root v1 with three root keys (threshold 2) and one release key, and what follows it."""

    def __init__(self) -> None:
        self.root_keys = _keys(3)
        self.release_key = Ed25519PrivateKey.generate()
        unsigned = new_trust_root(
            version=1,
            expires=YEAR,
            root_keys=[key.public_key() for key in self.root_keys],
            root_threshold=2,
            release_keys=[self.release_key.public_key()],
        )
        self.v1 = self_signed_root(_signed(unsigned, self.root_keys[:2]))


@pytest.fixture
def chain() -> Chain:
    return Chain()


def test_a_root_names_its_release_keys_by_the_manifests_key_ids(chain: Chain) -> None:
    assert chain.v1.version == 1
    assert set(chain.v1.release_keys) == {key_id(chain.release_key.public_key())}
    assert chain.v1.root_threshold == 2
    assert chain.v1.expires == YEAR


def test_the_next_version_signed_by_the_old_and_its_own_threshold_is_trusted(chain: Chain) -> None:
    new_release = Ed25519PrivateKey.generate()
    v2 = successor_root(chain.v1.body, expires=YEAR, release_keys=[new_release.public_key()])
    trusted = next_trust_root(chain.v1, _signed(v2, chain.root_keys[1:]))
    assert trusted.version == 2
    assert set(trusted.release_keys) == {key_id(new_release.public_key())}


def test_rollback_to_an_older_or_the_same_root_is_refused(chain: Chain) -> None:
    v2 = next_trust_root(
        chain.v1, _signed(successor_root(chain.v1.body, expires=YEAR), chain.root_keys[:2])
    )
    with pytest.raises(TrustRootRollback, match="v1 is not newer than v2"):
        next_trust_root(v2, chain.v1.body)
    with pytest.raises(TrustRootRollback):
        next_trust_root(v2, v2.body)


def test_a_gap_in_the_chain_is_refused(chain: Chain) -> None:
    v2 = successor_root(chain.v1.body, expires=YEAR)
    v3 = _signed(successor_root(v2, expires=YEAR), chain.root_keys)
    with pytest.raises(TrustRootGap, match="v2 is the next"):
        next_trust_root(chain.v1, v3)


def test_below_the_threshold_is_refused(chain: Chain) -> None:
    v2 = successor_root(chain.v1.body, expires=YEAR)
    with pytest.raises(TrustRootThreshold, match=r"1 valid signatures .* 2 needed"):
        next_trust_root(chain.v1, _signed(v2, chain.root_keys[:1]))


def _with_twin(body: bytes, keyid: str, twin: str) -> bytes:
    """The root with key `keyid` listed a second time, as `twin`, in the root role."""
    document = json.loads(body)
    document["signed"]["keys"][twin] = document["signed"]["keys"][keyid]
    document["signed"]["roles"]["root"]["keyids"].append(twin)
    return json.dumps(document).encode()


def test_the_same_key_counted_twice_meets_no_threshold(chain: Chain) -> None:
    """A held root lists one root key under a second key id; a successor signed by that one key
    under both ids has one signer, not the two the threshold asks for."""
    keyid = json.loads(sign_trust_root(chain.v1.body, chain.root_keys[0]))["signatures"][0]
    twin = "f" * 64
    held = read_trust_root(_with_twin(chain.v1.body, keyid["keyid"], twin))
    v2 = json.loads(
        sign_trust_root(successor_root(chain.v1.body, expires=YEAR), chain.root_keys[0])
    )
    v2["signatures"].append({"keyid": twin, "sig": v2["signatures"][0]["sig"]})
    with pytest.raises(TrustRootThreshold, match="1 valid signatures by the previous"):
        next_trust_root(held, json.dumps(v2).encode())


def test_a_root_signed_only_by_its_new_keys_is_refused(chain: Chain) -> None:
    new_root_keys = _keys(2)
    v2 = successor_root(
        chain.v1.body,
        expires=YEAR,
        root_keys=[key.public_key() for key in new_root_keys],
        root_threshold=2,
    )
    with pytest.raises(TrustRootThreshold, match="by the previous root keys"):
        next_trust_root(chain.v1, _signed(v2, new_root_keys))
    # Signed by the old threshold only, it is not proven possible with the new keys.
    with pytest.raises(TrustRootThreshold, match="by its own root keys"):
        next_trust_root(chain.v1, _signed(v2, chain.root_keys[:2]))
    both = next_trust_root(chain.v1, _signed(v2, [*chain.root_keys[:2], *new_root_keys]))
    assert both.version == 2


def _publish(chain: Chain, count: int, *, expires: datetime = YEAR) -> dict[int, bytes]:
    published = {1: chain.v1.body}
    body = chain.v1.body
    for version in range(2, count + 1):
        body = _signed(successor_root(body, expires=expires), chain.root_keys[:2])
        published[version] = body
    return published


def test_an_agent_on_v1_reaches_v5_in_one_walk(chain: Chain) -> None:
    published = _publish(chain, 5)
    kept: list[int] = []
    newest = walk_trust_roots(
        chain.v1, published.get, NOW, keep=lambda root: kept.append(root.version)
    )
    assert (newest.version, kept) == (5, [2, 3, 4, 5])


def test_the_newest_root_expired_is_refused_but_intermediate_ones_may_be(chain: Chain) -> None:
    published = _publish(chain, 3, expires=NOW - timedelta(days=1))
    with pytest.raises(TrustRootExpired, match="v3 expired"):
        walk_trust_roots(chain.v1, published.get, NOW)
    fresh = _signed(successor_root(published[3], expires=YEAR), chain.root_keys[:2])
    published[4] = fresh
    assert walk_trust_roots(chain.v1, published.get, NOW).version == 4


def test_an_endless_chain_stops_after_the_walks_limit(chain: Chain) -> None:
    published = _publish(chain, MAX_ROOT_STEPS + 3)
    kept: list[TrustRoot] = []
    with pytest.raises(TrustRootChainTooLong):
        walk_trust_roots(chain.v1, published.get, NOW, keep=kept.append)
    assert (
        kept[-1].version == MAX_ROOT_STEPS + 1
    )  # what was verified is kept: the next walk goes on


def test_release_keys_of_another_version_do_not_mix(chain: Chain) -> None:
    """Mix and match: a release key of v2 is not trusted by a holder of v1, nor v1's by v2."""
    new_release = Ed25519PrivateKey.generate()
    v2 = next_trust_root(
        chain.v1,
        _signed(
            successor_root(chain.v1.body, expires=YEAR, release_keys=[new_release.public_key()]),
            chain.root_keys[:2],
        ),
    )
    assert key_id(new_release.public_key()) not in chain.v1.release_keys
    assert key_id(chain.release_key.public_key()) not in v2.release_keys


def test_a_holder_of_trusted_key_files_takes_v1_signed_by_its_release_key(chain: Chain) -> None:
    legacy = {key_id(chain.release_key.public_key()): chain.release_key.public_key()}
    raw = {kid: key.public_bytes_raw() for kid, key in legacy.items()}
    with pytest.raises(TrustRootThreshold, match="not signed by any release key this host trusts"):
        first_trust_root(chain.v1.body, raw)
    migrated = first_trust_root(sign_trust_root(chain.v1.body, chain.release_key), raw)
    assert migrated.version == 1
    v2 = _signed(successor_root(chain.v1.body, expires=YEAR), [*chain.root_keys[:2]])
    with pytest.raises(TrustRootGap, match="starts at v1"):
        first_trust_root(sign_trust_root(v2, chain.release_key), raw)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(signed={**d["signed"], "_type": "targets"}), "not TUF root"),
        (lambda d: d["signed"].update(version=0), "not TUF root|version 0"),
        (lambda d: d["signed"]["roles"].pop("timestamp"), "not TUF root|roles"),
        (lambda d: d["signed"]["roles"]["root"].update(threshold=4), "threshold 4 but only 3"),
        (lambda d: d["signed"]["roles"]["targets"].update(threshold=2), "threshold 2 but only 1"),
        (lambda d: d["signed"]["roles"]["root"]["keyids"].append("a" * 64), "not listed"),
    ],
)
def test_a_malformed_root_is_refused_naming_what_is_wrong(
    chain: Chain, change: object, message: str
) -> None:
    document = json.loads(chain.v1.body)
    change(document)  # type: ignore[operator]
    with pytest.raises(TrustRootMalformed, match=message):
        read_trust_root(json.dumps(document).encode())


def test_absurd_bytes_are_malformed() -> None:
    for data in (b"", b"\xff\xfe", b"[]", b"{}", b"null", b"x" * (600 * 1024)):
        with pytest.raises(TrustRootMalformed):
            read_trust_root(data)
