"""`nachtwacht release root-…`: make, sign and check trust roots, on a machine that may never reach
the network.

    nachtwacht release root-keygen --out DIR
    nachtwacht release root-init --root-key PUB [--root-key PUB …] --threshold N \\
        --release-key PUB [--release-key PUB …] --expires-in 365d [--migration-key KEY] --out FILE
    nachtwacht release root-next --previous FILE [--root-key PUB …] [--threshold N] \\
        [--release-key PUB …] --expires-in 365d --out FILE
    nachtwacht release root-sign --key KEY FILE
    nachtwacht release root-show [--previous FILE | --trusted-key PUB …] FILE

A new version is written unsigned; then the holders of the root keys run `root-sign` on the same
file in turn, each on their own offline machine, until a threshold of the previous version's root
keys and a threshold of the new version's own have signed. `root-show` says whether a holder of the
previous version (or, for version 1, of the given trusted-key files) would trust it: exit 0 when it
would, 1 when not.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ground.clock import Clock
from ground.whole_numbers import whole_number
from signed_release.atomic_files import replace_file, write_new_file
from signed_release.bounded_read import read_at_most
from signed_release.cli_support import CommandParser, Subcommands, UsageError, parse_duration
from signed_release.errors import TrustRootError, TrustRootMalformed
from signed_release.keys import ROOT_KEY, generate_key_files, key_id, load_private_key
from signed_release.keys import load_public_key as load_public_key_file
from signed_release.manifest import format_instant
from signed_release.trust_root import (
    MAX_ROOT_BYTES,
    TrustRoot,
    check_not_expired,
    first_trust_root,
    new_trust_root,
    next_trust_root,
    read_trust_root,
    root_signers,
    self_signed_root,
    sign_trust_root,
    signature_count,
    signatures_by_strangers,
    signed_by,
    successor_root,
)

__all__ = [
    "MAX_ROOT_LIFETIME",
    "MIN_ROOT_LIFETIME",
    "ROOT_COMMANDS",
    "add_root_commands",
    "run_root_command",
]

ROOT_COMMANDS = frozenset({"root-keygen", "root-init", "root-next", "root-sign", "root-show"})
# A root that expires within hours is a typo ("12m" is twelve minutes): every agent would refuse
# every release once it passes. One that lasts decades is never renewed, so never rehearsed.
MIN_ROOT_LIFETIME = timedelta(days=1)
MAX_ROOT_LIFETIME = timedelta(days=5 * 365 + 2)
ROOT_FILE_MODE = 0o644

_OFFLINE = (
    "Root keys are meant to stay offline (a machine that never reaches the network, or a stick in "
    "a safe): whoever holds a threshold of them decides which release keys every agent trusts."
)


def _whole_number(value: str) -> int:
    number = whole_number(value)
    if number is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number")
    return number


def add_root_commands(commands: Subcommands[CommandParser]) -> None:
    keygen = commands.add_parser(
        "root-keygen",
        help="write a new root.key (0600) and root.pub; keep root.key offline",
        description="Write a new trust-root key pair into DIR. " + _OFFLINE,
    )
    keygen.add_argument("--out", type=Path, required=True, metavar="DIR")

    init = commands.add_parser(
        "root-init",
        help="write trust root version 1, unsigned",
        description="Write version 1 of the trust root, which no root key has signed yet: sign "
        "it with root-sign by at least --threshold of its root keys, and with the current "
        "release key too, so that agents that trust only their release-key files take it up.",
    )
    init.add_argument(
        "--root-key", type=Path, action="append", required=True, metavar="PUB", help="a root.pub"
    )
    init.add_argument(
        "--threshold",
        type=_whole_number,
        required=True,
        metavar="N",
        help="how many root keys must sign each new version",
    )
    init.add_argument(
        "--release-key",
        type=Path,
        action="append",
        required=True,
        metavar="PUB",
        help="a release.pub whose signed releases agents accept",
    )
    init.add_argument("--expires-in", required=True, metavar="D", help="e.g. 365d (1d to 5 years)")
    init.add_argument(
        "--migration-key",
        type=Path,
        metavar="KEY",
        help="a release.key agents already trust: signs version 1 at once, which is what lets "
        "agents on trusted-key files move to the root (same as root-sign with that key)",
    )
    init.add_argument("--out", type=Path, required=True, metavar="FILE")

    after = commands.add_parser(
        "root-next",
        help="write the next version of a trust root, unsigned",
        description="Write the version after --previous, unsigned; the keys of each role given "
        "replace that role's keys, the others are kept. It is trusted once a threshold of the "
        "previous version's root keys and a threshold of its own have signed it (root-sign). "
        "Dropping a release key here is how it is revoked.",
    )
    after.add_argument("--previous", type=Path, required=True, metavar="FILE")
    after.add_argument(
        "--root-key", type=Path, action="append", metavar="PUB", help="replaces the root keys"
    )
    after.add_argument(
        "--threshold", type=_whole_number, metavar="N", help="default: the previous one's"
    )
    after.add_argument(
        "--release-key", type=Path, action="append", metavar="PUB", help="replaces the release keys"
    )
    after.add_argument("--expires-in", required=True, metavar="D", help="e.g. 365d (1d to 5 years)")
    after.add_argument("--out", type=Path, required=True, metavar="FILE")

    sign = commands.add_parser(
        "root-sign",
        help="add this key's signature to a trust root file, in place",
        description="Add the signature of --key to FILE (its other signatures are kept): the "
        "holders of the root keys run it in turn on the same file. Signing version 1 with the "
        "current release.key too is what lets agents on trusted-key files move to the root. "
        + _OFFLINE,
    )
    sign.add_argument(
        "--key", type=Path, required=True, metavar="KEY", help="a root.key or release.key"
    )
    sign.add_argument(
        "file", type=Path, metavar="FILE", help="the trust root (replaced whole, its mode kept)"
    )

    show = commands.add_parser(
        "root-show",
        help="show a trust root and whether it would be trusted (exit 0) or not (exit 1)",
        description="Show FILE's version, expiry, keys and signatures, and whether a holder of "
        "--previous would trust it (without --previous: whether its own root keys meet their "
        "threshold; with --trusted-key: whether an agent trusting only those release keys would "
        "take it up as version 1). Exit 0 when it would be trusted, 1 when not.",
    )
    held = show.add_mutually_exclusive_group()
    held.add_argument("--previous", type=Path, metavar="FILE", help="the version held")
    held.add_argument(
        "--trusted-key",
        type=Path,
        action="append",
        metavar="PUB",
        help="a release.pub an agent on trusted-key files holds",
    )
    show.add_argument("file", type=Path, metavar="FILE")


def run_root_command(args: argparse.Namespace, clock: Clock) -> int:
    command: str = args.command
    if command == "root-keygen":
        return _keygen(args)
    if command == "root-init":
        return _init(args, clock.now())
    if command == "root-next":
        return _next(args, clock.now())
    if command == "root-sign":
        return _sign(args)
    return _show(args, clock.now())


# -- commands -------------------------------------------------------------------------------------


def _keygen(args: argparse.Namespace) -> int:
    private_path, public_path, kid = generate_key_files(args.out, ROOT_KEY)
    print(f"wrote {private_path} (mode 0600) and {public_path}")
    print(f"key id {kid}")
    print(f"keep {private_path.name} offline: it signs trust roots, never releases")
    return 0


def _init(args: argparse.Namespace, now: datetime) -> int:
    expires = _root_expiry(args.expires_in, now)
    root_keys = _public_keys(args.root_key, "--root-key")
    release_keys = _public_keys(args.release_key, "--release-key")
    _refuse_shared_keys(root_keys, release_keys)
    _check_threshold(args.threshold, len(root_keys), "")
    data = new_trust_root(
        version=1,
        expires=expires,
        root_keys=list(root_keys.values()),
        root_threshold=args.threshold,
        release_keys=list(release_keys.values()),
    )
    if args.migration_key is not None:
        migration_key = load_private_key(args.migration_key)
        data = sign_trust_root(data, migration_key)
    root = _write_out(args.out, data)
    if args.migration_key is not None:
        print(
            f"signed by release key {key_id(migration_key.public_key())}: agents trusting it "
            "take this root up"
        )
    print(
        f"next: {root.root_threshold} holders of its root keys run "
        f"`nachtwacht release root-sign --key root.key {args.out}`"
    )
    return 0


def _next(args: argparse.Namespace, now: datetime) -> int:
    previous = _read_root_file(args.previous, "--previous")
    expires = _root_expiry(args.expires_in, now)
    root_keys = None if args.root_key is None else _public_keys(args.root_key, "--root-key")
    release_keys = (
        None if args.release_key is None else _public_keys(args.release_key, "--release-key")
    )
    root_key_ids = set(previous.root_key_ids if root_keys is None else root_keys)
    release_key_ids = set(previous.release_keys if release_keys is None else release_keys)
    _refuse_shared_keys(root_key_ids, release_key_ids)
    threshold = previous.root_threshold if args.threshold is None else args.threshold
    _check_threshold(
        threshold,
        len(root_key_ids),
        "" if args.threshold is not None else f" (kept from v{previous.version}; give --threshold)",
    )
    data = successor_root(
        previous.body,
        expires=expires,
        root_keys=None if root_keys is None else list(root_keys.values()),
        root_threshold=threshold,
        release_keys=None if release_keys is None else list(release_keys.values()),
    )
    root = _write_out(args.out, data)
    for line in _changes(previous, root):
        print(line)
    print(
        f"next: {previous.root_threshold} holders of v{previous.version}'s root keys and "
        f"{root.root_threshold} of v{root.version}'s run "
        f"`nachtwacht release root-sign --key root.key {args.out}`"
    )
    return 0


def _sign(args: argparse.Namespace) -> int:
    root = _read_root_file(args.file, "FILE")
    private_key = load_private_key(args.key)
    signed = read_trust_root(sign_trust_root(root.body, private_key))
    replace_file(args.file, signed.body)
    kid = key_id(private_key.public_key())
    print(f"signed {args.file} (trust root v{signed.version}) with key {kid}, {_role(kid, signed)}")
    own = root_signers(signed, signed)
    print(
        f"it now carries {_count(signature_count(signed), 'signature')}; its own root keys: "
        f"{len(own)} of {signed.root_threshold} signed"
    )
    return 0


def _show(args: argparse.Namespace, now: datetime) -> int:
    root = _read_root_file(args.file, "FILE")
    previous = None if args.previous is None else _read_root_file(args.previous, "--previous")
    legacy = None if args.trusted_key is None else _raw_keys(args.trusted_key)
    own = root_signers(root, root)
    print(f"trust root v{root.version} ({args.file})")
    print(f"expires {format_instant(root.expires)} ({_time_left(root.expires, now)})")
    print(f"root keys, threshold {root.root_threshold} of {len(root.root_key_ids)}:")
    for kid in root.root_key_ids:
        print(f"  {kid}  {'signed' if kid in own else 'not signed'}")
    release_signed = signed_by(root, root.release_keys)
    print("release keys:")
    for kid in root.release_keys:
        print(f"  {kid}" + ("  signed" if kid in release_signed else ""))
    known = own | release_signed
    print(f"signatures: {signature_count(root)}")
    if previous is not None:
        by_previous = root_signers(previous, root)
        known |= by_previous
        met = _met(len(by_previous), previous.root_threshold)
        print(f"  v{previous.version}'s root keys: {met}")
        for kid in previous.root_key_ids:
            if kid not in root.root_key_ids:
                print(f"    {kid}  {'signed' if kid in by_previous else 'not signed'}")
    print(f"  its own root keys: {_met(len(own), root.root_threshold)}")
    if legacy is not None:
        by_legacy = signed_by(root, legacy)
        known |= by_legacy
        print(f"  trusted release keys: {_met(len(by_legacy), 1)}")
    strangers = signatures_by_strangers(
        root, *([] if previous is None else [previous]), raw_keys=(legacy or {}).values()
    )
    if strangers > 0:
        print(f"  {strangers} by keys named neither here nor in what is held")
    broken = signature_count(root) - len(known) - strangers
    if broken > 0:
        print(
            f"  {broken} by keys named here that do not verify (the file changed after they "
            "were made, or they were made over another file)"
        )
    try:
        if previous is not None:
            next_trust_root(previous, root.body)
            held = f"a holder of v{previous.version}"
        elif legacy is not None:
            first_trust_root(root.body, legacy)
            held = "an agent on these trusted-key files"
        else:
            self_signed_root(root.body)
            held = "an agent given it directly"
        check_not_expired(root, now)
    except TrustRootError as exc:
        print(f"not trusted: {exc}")
        return 1
    print(f"trusted: {held} would take up v{root.version}")
    return 0


# -- checks ---------------------------------------------------------------------------------------


def _root_expiry(value: str, now: datetime) -> datetime:
    lifetime = parse_duration(value)
    if lifetime < MIN_ROOT_LIFETIME:
        raise UsageError(
            f"--expires-in: {value!r} is less than a day (expected 1d to "
            f"{MAX_ROOT_LIFETIME.days}d): agents would refuse every release once it passes"
        )
    if lifetime > MAX_ROOT_LIFETIME:
        raise UsageError(
            f"--expires-in: {value!r} is more than 5 years (expected 1d to "
            f"{MAX_ROOT_LIFETIME.days}d): renew the root instead"
        )
    return now.replace(microsecond=0) + lifetime


def _check_threshold(threshold: int, key_count: int, note: str) -> None:
    if not 1 <= threshold <= key_count:
        raise UsageError(
            f"--threshold: {threshold}{note}, expected 1 to {key_count} (the number of root keys)"
        )


def _public_keys(paths: Sequence[Path], flag: str) -> dict[str, Ed25519PublicKey]:
    keys: dict[str, Ed25519PublicKey] = {}
    seen: dict[str, Path] = {}
    for path in paths:
        key = load_public_key_file(path)
        kid = key_id(key)
        if kid in keys:
            raise UsageError(f"{flag}: {path} is the same key as {seen[kid]} (key id {kid})")
        keys[kid] = key
        seen[kid] = path
    return keys


def _raw_keys(paths: Sequence[Path]) -> dict[str, bytes]:
    return {
        kid: key.public_bytes_raw() for kid, key in _public_keys(paths, "--trusted-key").items()
    }


def _refuse_shared_keys(root_key_ids: Iterable[str], release_key_ids: Iterable[str]) -> None:
    shared = sorted(set(root_key_ids) & set(release_key_ids))
    if shared:
        raise UsageError(
            f"--release-key: key {shared[0]} is a root key too (expected separate keys: root keys "
            "stay offline, a release key signs every build)"
        )


def _write_out(path: Path, data: bytes) -> TrustRoot:
    """Write a new root file to `--out` and say what it holds; an existing one is never replaced."""
    try:
        write_new_file(path, data, mode=ROOT_FILE_MODE)
    except FileExistsError as exc:
        raise UsageError(f"--out: {path} already exists (refusing to replace it)") from exc
    except OSError as exc:
        # Named as asked: the file is written through a temporary one beside it.
        raise UsageError(f"--out: cannot write {path} ({exc.strerror or exc})") from exc
    root = read_trust_root(data)
    print(f"wrote {path}: {_summary(root)}")
    return root


def _read_root_file(path: Path, flag: str) -> TrustRoot:
    try:
        data = read_at_most(path, MAX_ROOT_BYTES)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        return read_trust_root(data)
    except TrustRootMalformed as exc:
        raise UsageError(f"{flag} {path}: {exc}") from exc


# -- output ---------------------------------------------------------------------------------------


def _summary(root: TrustRoot) -> str:
    return (
        f"trust root v{root.version}, {root.root_threshold} of {len(root.root_key_ids)} root keys "
        f"to sign, {_count(len(root.release_keys), 'release key')}, expires "
        f"{format_instant(root.expires)}"
    )


def _changes(previous: TrustRoot, root: TrustRoot) -> list[str]:
    lines = []
    for kid in root.release_keys:
        if kid not in previous.release_keys:
            lines.append(f"release key added: {kid}")
    for kid in previous.release_keys:
        if kid not in root.release_keys:
            lines.append(
                f"release key dropped: {kid} (agents refuse releases signed only by it once they "
                f"hold v{root.version})"
            )
    for kid in root.root_key_ids:
        if kid not in previous.root_key_ids:
            lines.append(f"root key added: {kid}")
    for kid in previous.root_key_ids:
        if kid not in root.root_key_ids:
            lines.append(f"root key dropped: {kid}")
    if root.root_threshold != previous.root_threshold:
        lines.append(f"root threshold: {previous.root_threshold} -> {root.root_threshold}")
    return lines


def _role(kid: str, root: TrustRoot) -> str:
    if kid in root.root_key_ids:
        return f"a root key of v{root.version}"
    if kid in root.release_keys:
        if root.version == 1:
            return "a release key: counts for agents moving from trusted-key files to the root"
        return f"a release key of v{root.version}: its signature counts for nothing here"
    if root.version == 1:
        return (
            "a key v1 does not name: counts only if agents moving from trusted-key files "
            "trust it as a release key"
        )
    return (
        f"a key v{root.version} does not name: counts only if it is a root key of "
        f"v{root.version - 1}"
    )


def _met(signed: int, threshold: int) -> str:
    return f"{signed} of {threshold} needed signatures, " + (
        "threshold met" if signed >= threshold else "threshold NOT met"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _time_left(expires: datetime, now: datetime) -> str:
    left = expires - now
    if left <= timedelta(0):
        return f"EXPIRED {_count((-left).days, 'day')} ago"
    return f"in {_count(left.days, 'day')}"
