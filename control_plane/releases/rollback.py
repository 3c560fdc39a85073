"""Rolling a (channel, platform) back to an older build, as an operator's action.

The trust it rests on: this control plane holds no release-signing key, and an agent installs an
older build only from a manifest that a trusted release key signed with `allow_downgrade` and with
a `manifest_version` above every manifest the host already accepted. So the control plane cannot
push a host down by itself, and does not try: the older build must first be signed again, as a
downgrade, on the signing machine, and published —

    nachtwacht release sign --key release.key --version 1.1.0 --channel stable \\
        --platform linux-x86_64 --allow-downgrade --out rollback-1.1.0 BUILD-1.1.0.tar.gz
    nachtwacht control publish-release --allow-downgrade rollback-1.1.0/manifest.json \\
        rollback-1.1.0/manifest.sig BUILD-1.1.0.tar.gz

— which stores it as a rollback release that nobody is offered yet. The rollback action then:

- picks the target: the version asked for (`to`), else the previous good one — among the
  pair's releases older than its current one that are neither withdrawn nor halted, the newest
  that reached everyone (the build the fleet ran), else the newest: a release that only ever
  reached its first waves is no known-good way back;
- requires a signed downgrade release of that version (its manifest allows a downgrade, is newer
  than the current release's manifest, has not expired and, once a trust root is published, is
  signed by a release key the newest root names — agents following the root refuse any other),
  else refuses with the two commands above, so the operator knows exactly what to run where;
- withdraws the current release (its outstanding tokens revoked, so no download of it goes on)
  and makes the downgrade release current for the pair, at the `everyone` stage unless asked
  otherwise: it is the build the fleet ran before, the canary stage would only delay the way back;
- records the action with its actor and reason (`release.rolled_back`).

From then on the downgrade is an ordinary offer: hosts on the bad build take it at their next
slot, through the same caps, windows and verification as any update; hosts that never left the
older version have nothing to do, and hosts on an even older one update to it.

Each product line is rolled back on its own (`product`: the managed agent by default, or
nachtwacht's own agent, the updater): a rollback of one never touches the other's releases. An
updater that a host takes back this way goes through the host's own switch and check-in, as any
self-update does.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from control_plane.errors import Conflict, InvalidInput
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import required_text, stored_text
from control_plane.releases.products import CURRENT_TABLE, Product, product_of
from control_plane.releases.release_actions import mark_withdrawn
from control_plane.trust_roots.services import newest_trust_root
from control_plane.types import Connection
from ground.limits import MAX_VERSION_LENGTH, RELEASE_NAME_PATTERN
from signed_release.errors import ReleaseError
from signed_release.manifest import parse_manifest
from signed_release.versions import is_valid_version, version_key

__all__ = ["MAX_ROLLBACK_REASON_LENGTH", "RolledBack", "allows_downgrade", "roll_back"]

MAX_ROLLBACK_REASON_LENGTH = 500
_STAGES = ("canary", "everyone")
_NAME = re.compile(RELEASE_NAME_PATTERN)


@dataclass(frozen=True, kw_only=True)
class RolledBack:
    product: Product
    channel: str
    platform: str
    reason: str
    # The release the pair offered before: now withdrawn.
    from_release_id: UUID
    from_version: str
    from_manifest_version: int
    # The signed downgrade release the pair offers now, and its stage.
    to_release_id: UUID
    to_version: str
    to_manifest_version: int
    stage: str
    # Tokens of the withdrawn release granted but not yet used, revoked by the rollback.
    revoked_tokens: int


def roll_back(
    conn: Connection,
    *,
    channel: object,
    platform: object,
    to: object,
    reason: object,
    stage: object,
    now: datetime,
    actor: Actor,
    product: object = "agent",
) -> RolledBack:
    """Roll the pair back inside the caller's transaction (see the module's docstring)."""
    line = product_of(product)
    current_table = CURRENT_TABLE[line]
    pair_channel = _name("channel", channel)
    pair_platform = _name("platform", platform)
    reason_text = required_text(
        "reason", reason, MAX_ROLLBACK_REASON_LENGTH, required_to="roll back (say why)"
    )
    if stage not in _STAGES:
        raise InvalidInput("stage", stage, "is not 'canary' or 'everyone'")
    target_text = stored_text("to", to, MAX_VERSION_LENGTH)
    if target_text is not None and not is_valid_version(target_text):
        raise InvalidInput("to", target_text, "is not a version (expected e.g. 1.5.0)")
    pair = f"{pair_channel}/{pair_platform}" + (" (updater)" if line == "updater" else "")

    # FOR UPDATE waits for the grants in flight (they hold the row FOR SHARE): the revocation
    # below then sees their tokens, and every later grant sees the new current release.
    pointer = conn.execute(
        f"SELECT release_id FROM {current_table}"  # noqa: S608 - a constant
        " WHERE channel = %s AND platform = %s FOR UPDATE",
        [pair_channel, pair_platform],
    ).fetchone()
    if pointer is None or pointer["release_id"] is None:
        raise Conflict(
            f"{pair} offers no release now: there is nothing to roll back",
            code="nothing_to_roll_back",
        )
    releases = _releases_of_pair(conn, line, pair_channel, pair_platform)
    (bad,) = (row for row in releases if row["id"] == pointer["release_id"])
    version = _target_version(releases, bad, target_text, pair)
    root = newest_trust_root(conn)
    trusted = None if root is None else frozenset(root.release_keys)
    downgrade = _signed_downgrade(releases, bad, version, now, trusted)
    if downgrade is None:
        refusal = _not_signed(bad, version, line, pair_channel, pair_platform)
        dropped = _signed_downgrade(releases, bad, version, now, None)
        if root is not None and dropped is not None:
            refusal = _by_a_dropped_key(refusal, dropped, root.version)
        raise refusal

    revoked = mark_withdrawn(
        conn,
        bad["id"],
        reason=f"rolled back to {version}: {reason_text}",
        by=actor.name or actor.kind,
        now=now,
    )
    conn.execute(
        "UPDATE releases SET stage = %s, stage_changed_at = %s WHERE id = %s AND stage <> %s",
        [stage, now, downgrade["id"], stage],
    )
    conn.execute(
        f"UPDATE {current_table} SET release_id = %s, changed_at = %s"  # noqa: S608 - a constant
        " WHERE channel = %s AND platform = %s",
        [downgrade["id"], now, pair_channel, pair_platform],
    )
    rolled = RolledBack(
        product=line,
        channel=pair_channel,
        platform=pair_platform,
        reason=reason_text,
        from_release_id=bad["id"],
        from_version=bad["agent_version"],
        from_manifest_version=bad["manifest_version"],
        to_release_id=downgrade["id"],
        to_version=downgrade["agent_version"],
        to_manifest_version=downgrade["manifest_version"],
        stage=str(stage),
        revoked_tokens=revoked,
    )
    _record_rolled_back(conn, rolled, actor=actor, now=now)
    return rolled


def _name(field: str, value: object) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InvalidInput(
            field, value, "is not a name (lower-case letters, digits, '-' or '_', e.g. stable)"
        )
    return value


_RELEASES = """
SELECT rel.id, rel.agent_version, rel.manifest_version, rel.manifest, rel.expires, rel.key_id,
       rel.withdrawn_at, rel.stage,
       EXISTS (SELECT 1 FROM release_halts h
                WHERE h.release_id = rel.id AND h.resumed_at IS NULL) AS halted
  FROM releases rel
 WHERE rel.product = %s AND rel.channel = %s AND rel.platform = %s
 ORDER BY rel.manifest_version DESC
"""


def _releases_of_pair(
    conn: Connection, product: Product, channel: str, platform: str
) -> list[dict[str, Any]]:
    """Every release of the pair, newest manifest first (a pair has few: read them whole)."""
    return list(conn.execute(_RELEASES, [product, channel, platform]).fetchall())


def _target_version(
    releases: list[dict[str, Any]], bad: dict[str, Any], asked: str | None, pair: str
) -> str:
    """The version to go back to: the one asked for, else the previous good one."""
    bad_key = version_key(bad["agent_version"])
    if asked is not None:
        if version_key(asked) >= bad_key:
            raise InvalidInput(
                "to",
                asked,
                f"is not older than {bad['agent_version']}, the current release of {pair} "
                "(a rollback goes to an older version; a newer build is published)",
            )
        if not any(row["agent_version"] == asked for row in releases):
            raise InvalidInput("to", asked, f"is not the version of a release of {pair}")
        return asked
    good = [
        row
        for row in releases
        if row["withdrawn_at"] is None
        and not row["halted"]
        and version_key(row["agent_version"]) < bad_key
    ]
    ran = [row for row in good if row["stage"] == "everyone"] or good
    if not ran:
        raise Conflict(
            f"{pair} has no release older than {bad['agent_version']} that is neither withdrawn"
            " nor halted: name the version to go back to (to)",
            code="no_previous_release",
            field="to",
        )
    return max((str(row["agent_version"]) for row in ran), key=version_key)


def _signed_downgrade(
    releases: list[dict[str, Any]],
    bad: dict[str, Any],
    version: str,
    now: datetime,
    trusted: frozenset[str] | None,
) -> dict[str, Any] | None:
    """The newest release of `version` that agents on the bad build accept: signed as a
    downgrade, with a manifest newer than the bad build's, not expired, not withdrawn, and by a
    key of `trusted` (the newest trust root's release keys; None: no root, any key stored)."""
    for row in releases:  # newest manifest first
        if (
            row["agent_version"] == version
            and row["withdrawn_at"] is None
            and row["manifest_version"] > bad["manifest_version"]
            and row["expires"] > now
            and (trusted is None or row["key_id"] in trusted)
            and allows_downgrade(row)
        ):
            return row
    return None


def _by_a_dropped_key(refusal: Conflict, dropped: dict[str, Any], root_version: int) -> Conflict:
    """The refusal, saying why the downgrade stored does not count: its key was revoked."""
    return Conflict(
        f"the signed downgrade of {dropped['agent_version']} (manifest_version "
        f"{dropped['manifest_version']}) is by key {str(dropped['key_id'])[:16]}…, which trust "
        f"root v{root_version} no longer names: agents following the root would refuse it; "
        + refusal.message,
        code=str(refusal.code),
        **refusal.fields,
    )


def allows_downgrade(row: dict[str, Any]) -> bool:
    """Whether a stored release's manifest was signed as a downgrade (`--allow-downgrade`)."""
    try:
        return parse_manifest(bytes(row["manifest"])).allow_downgrade
    except ReleaseError:  # stored only after it parsed; a row that no longer does is no downgrade
        return False


def _not_signed(
    bad: dict[str, Any], version: str, product: Product, channel: str, platform: str
) -> Conflict:
    """The refusal that says what to run on the signing machine, and then here."""
    named = ["--product", "updater"] if product == "updater" else []
    out = f"rollback-{version}"
    build = f"BUILD-{version}.tar.gz"
    sign = shlex.join(
        [
            "nachtwacht", "release", "sign", "--key", "release.key", *named,
            "--version", version, "--channel", channel, "--platform", platform,
            "--allow-downgrade", "--out", out, build,
        ]
    )  # fmt: skip
    publish = shlex.join(
        [
            "nachtwacht", "control", "publish-release", *named, "--allow-downgrade",
            f"{out}/manifest.json", f"{out}/manifest.sig", build,
        ]
    )  # fmt: skip
    return Conflict(
        f"no signed downgrade release of {version} for {channel}/{platform}"
        f"{' (updater)' if product == 'updater' else ''}: hosts on "
        f"{bad['agent_version']} (manifest_version {bad['manifest_version']}) install an older "
        "build only from a manifest a release key signed with allow_downgrade and a newer "
        "manifest_version, and this control plane holds no release key. On the signing machine "
        f"run `{sign}` ({build}: the {version} build), publish it with `{publish}`, then roll "
        "back again",
        code="rollback_not_signed",
        sign_command=sign,
        publish_command=publish,
    )


def _record_rolled_back(
    conn: Connection, rolled: RolledBack, *, actor: Actor, now: datetime
) -> None:
    record_action(
        conn,
        kind="release.rolled_back",
        actor=actor,
        at=now,
        data={
            "product": rolled.product,
            "release_id": str(rolled.from_release_id),
            "version": rolled.from_version,
            "manifest_version": rolled.from_manifest_version,
            "channel": rolled.channel,
            "platform": rolled.platform,
            "reason": rolled.reason,
            "to_release_id": str(rolled.to_release_id),
            "to_version": rolled.to_version,
            "to_manifest_version": rolled.to_manifest_version,
            "stage": rolled.stage,
            "revoked_tokens": rolled.revoked_tokens,
        },
    )
