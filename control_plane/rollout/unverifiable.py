"""The releases a trust root leaves unverifiable: live (not withdrawn) releases signed by a key the
root does not name.

Agents following the root refuse such a release (the run fails, `verification_failed`), yet the
control plane may still offer it: as the pair's current release, as the release before it that
hosts beyond the current wave are offered during a canary rollout
(`control_plane.rollout.offer`), or to the hosts pinned to its version. Publishing the root is
not refused for it — the operator revoking a compromised key must not be held up — but the
answer names each such release and what to do about it, so none is left offered by accident.
"""

from __future__ import annotations

import shlex
from typing import Any

from control_plane.releases.products import CURRENT_TABLE, PRODUCTS, Product
from control_plane.releases.rollback import allows_downgrade
from control_plane.rollout.offer import previous_releases
from control_plane.trust_roots.unverifiable import OfferedAs, UnverifiableRelease
from control_plane.types import Connection
from signed_release.versions import version_key

__all__ = ["unverifiable_releases"]

_LIVE_BY_OTHER_KEYS = """
SELECT rel.id, rel.product, rel.channel, rel.platform, rel.agent_version, rel.manifest_version,
       rel.key_id, rel.manifest
  FROM releases rel
 WHERE rel.withdrawn_at IS NULL AND NOT (rel.key_id = ANY(%s))
 ORDER BY rel.product, rel.channel, rel.platform, rel.manifest_version DESC
"""

# The pairs' current releases of a product line.
_CURRENT = {
    product: f"""
SELECT cur.channel, cur.platform, rel.id, rel.agent_version, rel.manifest_version, rel.stage
  FROM {table} cur JOIN releases rel ON rel.id = cur.release_id
"""  # noqa: S608 - a constant
    for product, table in CURRENT_TABLE.items()
}


def unverifiable_releases(
    conn: Connection, release_key_ids: frozenset[str]
) -> tuple[UnverifiableRelease, ...]:
    """Every live release signed by a key not among `release_key_ids`, with how it is offered and
    what to do about it. One query for the releases; the current and previous ones per product
    line are read only when there is any."""
    rows = conn.execute(_LIVE_BY_OTHER_KEYS, [sorted(release_key_ids)]).fetchall()
    if not rows:
        return ()
    found = []
    for product in PRODUCTS:
        current, previous = _current_and_previous(conn, product)
        for row in rows:
            if row["product"] != product:
                continue
            pair = (row["channel"], row["platform"])
            if pair in current and current[pair]["id"] == row["id"]:
                found.append(_current(row))
            elif pair in previous and previous[pair]["id"] == row["id"]:
                found.append(_previous(row, current[pair]))
            else:
                found.append(_stored(row, current.get(pair)))
    return tuple(found)


def _current_and_previous(
    conn: Connection, product: Product
) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[tuple[str, str], dict[str, Any]]]:
    """The pairs' current releases, and the previous release of those still in a canary stage."""
    rows = conn.execute(_CURRENT[product]).fetchall()
    current = {(row["channel"], row["platform"]): row for row in rows}
    in_canary = {pair for pair, row in current.items() if row["stage"] != "everyone"}
    return current, previous_releases(conn, current, in_canary, product)


def _product_flag(row: dict[str, Any]) -> list[str]:
    return ["--product", "updater"] if row["product"] == "updater" else []


def _sign_again(row: dict[str, Any], *, downgrade: bool) -> tuple[str, str]:
    """The commands that sign the same build again with a key the root names, and publish it."""
    version = row["agent_version"]
    out = f"release-{version}-again"
    build = f"BUILD-{version}.tar.gz"
    allow = ["--allow-downgrade"] if downgrade else []
    sign = shlex.join(
        [
            "nachtwacht", "release", "sign", "--key", "release.key", *_product_flag(row),
            "--version", version, "--channel", row["channel"], "--platform", row["platform"],
            *allow, "--out", out, build,
        ]
    )  # fmt: skip
    publish = shlex.join(
        [
            "nachtwacht", "control", "publish-release", *_product_flag(row), *allow,
            f"{out}/manifest.json", f"{out}/manifest.sig", build,
        ]
    )  # fmt: skip
    return sign, publish


def _withdraw(row: dict[str, Any]) -> str:
    return shlex.join(
        [
            "nachtwacht", "control", "withdraw-release", str(row["id"]),
            "--reason", "signed by a release key the trust root no longer names",
        ]
    )  # fmt: skip


def _entry(
    row: dict[str, Any], offered_as: OfferedAs, what_to_do: str, commands: tuple[str, ...]
) -> UnverifiableRelease:
    return UnverifiableRelease(
        release_id=row["id"],
        product=row["product"],
        channel=row["channel"],
        platform=row["platform"],
        version=row["agent_version"],
        manifest_version=row["manifest_version"],
        key_id=row["key_id"],
        offered_as=offered_as,
        what_to_do=what_to_do,
        commands=commands,
    )


def _current(row: dict[str, Any]) -> UnverifiableRelease:
    downgrade = allows_downgrade(row)
    what = (
        "the pair's current release: sign the same build again with a release key the root "
        "names"
        + (
            " (it is the downgrade the pair was rolled back to: as a downgrade)"
            if downgrade
            else ""
        )
        + " on the signing machine, then publish it here; it takes this signing's place in its "
        "wave"
    )
    return _entry(row, "current", what, _sign_again(row, downgrade=downgrade))


def _previous(row: dict[str, Any], current: dict[str, Any]) -> UnverifiableRelease:
    promote = shlex.join(
        [
            "nachtwacht", "control", "promote", str(current["id"]),
            "--reason", "the release before it is signed by a revoked release key",
        ]
    )  # fmt: skip
    what = (
        "offered to the hosts the current release's canary rollout has not reached yet: promote "
        "the current release to everyone, or withdraw this one (those hosts are then offered "
        "the next older release that is not withdrawn)"
    )
    return _entry(row, "previous", what, (promote, _withdraw(row)))


def _stored(row: dict[str, Any], current: dict[str, Any] | None) -> UnverifiableRelease:
    # Older than the pair's current release, it is published again as a downgrade.
    older = current is not None and version_key(row["agent_version"]) < version_key(
        current["agent_version"]
    )
    what = (
        "not the pair's current release; still offered to hosts pinned to its version, and a "
        "rollback to it is refused: withdraw it, or, if a pin or a rollback needs it, sign the "
        "same build again" + (" as a downgrade" if older else "") + " and publish it"
    )
    return _entry(row, "stored", what, (_withdraw(row), *_sign_again(row, downgrade=older)))
