"""`nachtwacht control trust-root …`: the trust roots the control plane serves to agents.

    trust-root publish FILE   store a signed root file as given, after checking it is the next
                              version after the newest stored, signed by a threshold of that
                              root's root keys and of its own (the first: version 1, by its own)
    trust-root list           the versions stored, how many agents hold each, and the live
                              releases the newest leaves unverifiable

The control plane holds no key: the file is signed on the machine that holds the root keys
(`nachtwacht release root-next`, `root-sign`) and only checked here. Like the other commands,
these act through the service the API's route calls, as the command line (`cli:<login>`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from control_plane.cli_common import (
    Parser,
    add_admin_flags,
    admin_pool,
    cli_actor,
    emit,
    printed,
)
from control_plane.errors import ConfigurationError
from control_plane.rollout.unverifiable import unverifiable_releases
from control_plane.trust_roots.services import TrustRootList, TrustRootService
from control_plane.trust_roots.unverifiable import UnverifiableRelease
from ground.clock import clock_from_env
from ground.contract import format_instant
from signed_release.trust_root import MAX_ROOT_BYTES

__all__ = ["TRUST_ROOT_COMMANDS", "add_trust_root_commands"]


def add_trust_root_commands(commands: Any) -> None:
    trust_root = commands.add_parser(
        "trust-root", help="publish a signed trust root, or list those published"
    )
    actions = trust_root.add_subparsers(
        dest="trust_root_action", required=True, parser_class=Parser
    )
    publish = actions.add_parser(
        "publish", help="store the next signed trust root (checked to chain from the newest)"
    )
    publish.add_argument("file", metavar="FILE", help="the signed root file (root-next, root-sign)")
    add_admin_flags(publish)
    listed = actions.add_parser(
        "list", help="the published versions, who holds which, and releases left unverifiable"
    )
    add_admin_flags(listed)


def _root_file(path: str) -> bytes:
    """The file's bytes; one larger than any root is refused before it is read whole."""
    try:
        with Path(path).open("rb") as opened:
            data = opened.read(MAX_ROOT_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"FILE: cannot read {path!r} ({exc.strerror})") from exc
    if len(data) > MAX_ROOT_BYTES:
        raise ConfigurationError(
            f"FILE: {path!r} is larger than {MAX_ROOT_BYTES} bytes, the largest trust root"
        )
    return data


def _publish(args: argparse.Namespace) -> int:
    body = _root_file(args.file)
    with admin_pool(args) as pool:
        published = TrustRootService(pool, find_unverifiable=unverifiable_releases).publish(
            body, now=clock_from_env().now(), actor=cli_actor()
        )
    payload = asdict(published)
    payload["expires_at"] = format_instant(published.expires_at)
    payload["release_key_ids"] = list(published.release_key_ids)
    payload["root_key_ids"] = list(published.root_key_ids)
    payload["unverifiable_releases"] = [
        {**asdict(found), "release_id": str(found.release_id), "commands": list(found.commands)}
        for found in published.unverifiable_releases
    ]
    verb = "already published" if published.already_published else "published"
    release_keys = ", ".join(key[:16] + "…" for key in published.release_key_ids)
    if not published.already_published:
        outcome = "agents take it at their next poll"
    elif published.version == published.newest_version:
        outcome = "nothing changed"
    else:
        outcome = (
            f"nothing changed; the newest is v{published.newest_version}, the root agents follow"
        )
    emit(
        args,
        payload,
        [
            f"{verb} trust root v{published.version} (expires "
            f"{format_instant(published.expires_at)}): release keys {release_keys}; root keys "
            f"{published.root_threshold} of {len(published.root_key_ids)}; {outcome}",
            *_unverifiable_lines(
                published.unverifiable_releases,
                root=(
                    "this root"
                    if published.version == published.newest_version
                    else f"the newest root (v{published.newest_version})"
                ),
            ),
        ],
    )
    return 0


def _unverifiable_lines(found: tuple[UnverifiableRelease, ...], *, root: str) -> list[str]:
    """The warning that names each live release `root` leaves unverifiable, and what to do."""
    if not found:
        return []
    lines = [
        f"warning: {len(found)} release(s) not withdrawn are signed by a release key {root} "
        "does not name: agents following it refuse them (the run fails, verification_failed) "
        "while they are offered"
    ]
    for release in found:
        product = " (updater)" if release.product == "updater" else ""
        lines.append(
            f"  {release.version} {release.channel}/{release.platform}{product} (release "
            f"{release.release_id}, manifest_version {release.manifest_version}, key "
            f"{release.key_id[:16]}…): {release.what_to_do}"
        )
        lines.extend(f"      {command}" for command in release.commands)
    return lines


def _list(args: argparse.Namespace) -> int:
    with admin_pool(args) as pool:
        listed = TrustRootService(pool, find_unverifiable=unverifiable_releases).list()
    if args.json:
        printed(TypeAdapter(TrustRootList).dump_json(listed).decode("utf-8"))
        return 0
    if not listed.roots:
        printed("no trust root published: agents trust their release key files")
    for root in listed.roots:
        printed(
            f"v{root.version}  expires {format_instant(root.expires_at)}  published "
            f"{format_instant(root.published_at)} by {root.published_by}  "
            f"held by {root.agents_holding} agent(s)"
        )
    printed(
        f"agents holding an older version: {listed.agents_holding_older}; "
        f"holding none: {listed.agents_holding_none}"
    )
    for line in _unverifiable_lines(
        listed.unverifiable_releases, root=f"the newest root (v{listed.newest_version})"
    ):
        printed(line)
    return 0


def _trust_root(args: argparse.Namespace) -> int:
    actions: dict[str, Callable[[argparse.Namespace], int]] = {
        "publish": _publish,
        "list": _list,
    }
    return actions[args.trust_root_action](args)


TRUST_ROOT_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"trust-root": _trust_root}
