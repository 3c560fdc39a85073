"""`nachtwacht release …`: make a release key, sign an agent build, check a signature; make, sign
and check trust roots (`signed_release.root_cli`: root-keygen, root-init, root-next, root-sign,
root-show).

    nachtwacht release keygen --out DIR
    nachtwacht release sign --key DIR/release.key --version 1.5.0 --channel stable \\
        --platform linux-x86_64 --expires-in 30d [--manifest-version N] [--allow-downgrade] \\
        [--base DIR ... [--patches 3]] [--product agent|updater] --out OUTDIR ARTIFACT
    nachtwacht release verify --public-key release.pub [--artifact FILE] MANIFEST SIGNATURE

`--allow-downgrade` signs an older build again for a rollback: its new manifest_version puts it
above every manifest agents accepted, and only that signed permission lets an agent on a newer
version install it (the control plane, holding no release key, cannot give it).

`--base` (repeatable) names earlier releases, each a folder holding its manifest.json and build, or
a folder of such folders: a patch from each of the newest `--patches` of the same channel and
platform is written beside ARTIFACT and signed into the manifest (signed_release/delta_release.py).

`--product updater` signs a release of nachtwacht's own agent, the updater: its artifact is the
offline bundle (`bin/package`), its version the updater's. Without it the build is the managed
agent, as every release before the product line was.

A package above this one may add subcommands (`ExtraCommand`): the `nachtwacht` command adds
`build-demo-agent`, whose demo agent lives in the roof (`nachtwacht.demo_world`), not in the release
format.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ground.clock import Clock, clock_from_env
from signed_release.artifact import describe_artifact
from signed_release.atomic_files import write_new_file
from signed_release.bounded_read import read_at_most
from signed_release.cli_support import (
    CommandParser,
    ExtraCommand,
    UsageError,
    parse_duration,
    positive_int,
    version_argument,
)
from signed_release.delta_release import find_bases, make_patches
from signed_release.errors import InvalidField, ReleaseError
from signed_release.keys import generate_key_files, load_private_key, load_public_keys
from signed_release.manifest import (
    MAX_MANIFEST_BYTES,
    PRODUCTS,
    Manifest,
    format_instant,
    parse_manifest,
)
from signed_release.root_cli import ROOT_COMMANDS, add_root_commands, run_root_command
from signed_release.signature import MAX_SIGNATURE_FILE_BYTES, check_signature, sign_manifest

__all__ = ["ExtraCommand", "main", "parse_duration", "version_argument"]


def _build_parser(extra: Sequence[ExtraCommand]) -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="nachtwacht release",
        description="Make release keys and sign builds; make, sign and check trust roots.",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)

    keygen = commands.add_parser("keygen", help="write a new release.key (0600) and release.pub")
    keygen.add_argument("--out", type=Path, required=True, metavar="DIR")

    sign = commands.add_parser("sign", help="write manifest.json and manifest.sig for a build")
    sign.add_argument("--key", type=Path, required=True, help="the release.key to sign with")
    sign.add_argument(
        "--version", type=version_argument, required=True, help="the agent version, 1.5.0"
    )
    sign.add_argument("--channel", default="stable")
    sign.add_argument("--platform", required=True, help="e.g. linux-x86_64")
    sign.add_argument("--expires-in", default="30d", help="e.g. 30d, 12h (default 30d)")
    sign.add_argument(
        "--manifest-version",
        type=positive_int,
        help="must exceed every earlier release's; default: the signing time in Unix milliseconds",
    )
    sign.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="let agents on a newer version install this one: signing an older build again for "
        "a rollback (publish it with `nachtwacht control publish-release --allow-downgrade`)",
    )
    sign.add_argument(
        "--base",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="an earlier release (its folder with manifest.json and build) or a folder of them; "
        "repeatable: patches from the newest --patches of this channel and platform",
    )
    sign.add_argument(
        "--patches",
        type=positive_int,
        default=3,
        metavar="N",
        help="how many earlier builds get a patch (default 3)",
    )
    sign.add_argument(
        "--product",
        choices=PRODUCTS,
        default="agent",
        help="agent: the managed agent's build (default); updater: nachtwacht's own agent, "
        "its offline bundle",
    )
    sign.add_argument("--out", type=Path, required=True, metavar="OUTDIR")
    sign.add_argument("artifact", type=Path, metavar="ARTIFACT", help="the agent build (.tar.gz)")

    verify = commands.add_parser("verify", help="check a manifest and signature (and artifact)")
    verify.add_argument("--public-key", type=Path, action="append", required=True)
    verify.add_argument("--artifact", type=Path)
    verify.add_argument("manifest", type=Path, metavar="MANIFEST")
    verify.add_argument("signature", type=Path, metavar="SIGNATURE")

    add_root_commands(commands)
    for command in extra:
        command.add_arguments(commands.add_parser(command.name, help=command.help))
    return parser


def _keygen(args: argparse.Namespace) -> int:
    private_path, public_path, kid = generate_key_files(args.out)
    print(f"wrote {private_path} (mode 0600, keep it secret) and {public_path}")
    print(f"key id {kid}")
    return 0


_RELEASE_FILES = ("manifest.json", "manifest.sig")

# The manifest's fields `sign` fills from a flag, by the flag's name.
_SIGN_FLAGS = {
    "manifest_version": "--manifest-version",
    "channel": "--channel",
    "platform": "--platform",
    "agent_version": "--version",
    "product": "--product",
}


def _sign(args: argparse.Namespace, clock: Clock) -> int:
    lifetime = parse_duration(args.expires_in)
    _check_out(args.out)
    private_key = load_private_key(args.key)
    facts = describe_artifact(args.artifact, product=args.product)
    now = clock.now()
    issued_at = now.replace(microsecond=0)
    delta = None
    if args.base:
        bases = find_bases(
            args.base,
            channel=args.channel,
            platform=args.platform,
            version=args.version,
            count=args.patches,
        )
        delta = make_patches(args.artifact, facts.unpacked_size, bases)
    try:
        manifest = Manifest(
            manifest_version=args.manifest_version or int(now.timestamp() * 1000),
            issued_at=issued_at,
            expires=issued_at + lifetime,
            channel=args.channel,
            platform=args.platform,
            agent_version=args.version,
            length=facts.length,
            sha256=facts.sha256,
            unpacked_size=facts.unpacked_size,
            allow_downgrade=args.allow_downgrade,
            tar_length=None if delta is None else delta.tar_length,
            tar_sha256=None if delta is None else delta.tar_sha256,
            patches=() if delta is None else delta.patches,
            product=args.product,
        )
    except InvalidField as exc:
        # The manifest names its fields; the release manager typed the flags that fill them.
        flag = _SIGN_FLAGS.get(exc.field)
        if flag is None:
            raise
        raise InvalidField(flag, str(exc).removeprefix(f"{exc.field}: ")) from exc
    manifest_bytes = manifest.to_bytes()
    signature_bytes = sign_manifest(manifest_bytes, private_key)
    _write_release(args.out, manifest_bytes, signature_bytes)
    print(
        f"signed {_named(manifest)} for {manifest.channel}/{manifest.platform}: "
        f"manifest_version {manifest.manifest_version}, {facts.length} bytes, "
        f"sha256 {facts.sha256[:16]}…, expires {format_instant(manifest.expires)}"
    )
    print(f"wrote {args.out / 'manifest.json'} and {args.out / 'manifest.sig'}")
    if delta is not None:
        for offer, path in zip(delta.patches, delta.files, strict=True):
            print(
                f"patch from {offer.base_version}: {path} ({offer.length} bytes, "
                f"{offer.length / facts.length:.1%} of the build)"
            )
    if manifest.allow_downgrade:
        # The signature is the only thing an agent on a newer version takes a downgrade from.
        print(
            "signed as a downgrade: agents on a newer version accept it; publish it with "
            "`nachtwacht control publish-release --allow-downgrade`, then roll back with "
            f"`nachtwacht control rollback --channel {manifest.channel} --platform "
            f"{manifest.platform} --to {manifest.agent_version} --reason …`"
        )
    return 0


def _check_out(out: Path) -> None:
    """Refused before any work: `--out` is not a folder, or holds a release signed before."""
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"--out: {out} is not a folder (expected a folder for manifest.json and manifest.sig)"
        )
    for name in _RELEASE_FILES:
        if (out / name).exists():
            raise UsageError(
                f"--out: {out / name} already exists (refusing to replace it: sign into a new "
                "folder)"
            )


def _write_release(out: Path, manifest_bytes: bytes, signature_bytes: bytes) -> None:
    """Each file whole or not at all, and never over one that is there."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out: {out}: cannot make the folder ({exc.strerror or exc})") from exc
    for name, data in zip(_RELEASE_FILES, (manifest_bytes, signature_bytes), strict=True):
        try:
            write_new_file(out / name, data, mode=0o644)
        except FileExistsError as exc:
            raise UsageError(
                f"--out: {out / name} already exists (refusing to replace it)"
            ) from exc


def _named(manifest: Manifest) -> str:
    return manifest.agent_version + (" (updater)" if manifest.product == "updater" else "")


def _verify(args: argparse.Namespace) -> int:
    trusted = load_public_keys(args.public_key)
    manifest_bytes = _read_within(args.manifest, MAX_MANIFEST_BYTES, "manifest")
    signature_bytes = _read_within(args.signature, MAX_SIGNATURE_FILE_BYTES, "signature file")
    signer = check_signature(manifest_bytes, signature_bytes, trusted)
    manifest = parse_manifest(manifest_bytes)
    if args.artifact is not None:
        facts = describe_artifact(args.artifact, product=manifest.product)
        if (facts.length, facts.sha256) != (manifest.length, manifest.sha256):
            raise UsageError(
                f"{args.artifact}: {facts.length} bytes sha256 {facts.sha256} is not the signed "
                f"artifact ({manifest.length} bytes sha256 {manifest.sha256})"
            )
    print(
        f"good signature by key {signer}: {_named(manifest)} for "
        f"{manifest.channel}/{manifest.platform}, manifest_version {manifest.manifest_version}, "
        f"expires {format_instant(manifest.expires)}"
        + (", artifact matches" if args.artifact is not None else "")
    )
    return 0


def _read_within(path: Path, limit: int, what: str) -> bytes:
    """The file's bytes, read no further than `limit`: a device given by mistake has no end."""
    try:
        data = read_at_most(path, limit)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if len(data) > limit:
        raise UsageError(f"{path}: is larger than any {what} (at most {limit} bytes)")
    return data


def _clock() -> Clock:
    clock = clock_from_env()
    if clock.is_fake:
        print(f"nachtwacht release: {clock.describe()}", file=sys.stderr)
    return clock


def main(argv: list[str], *, extra_commands: Sequence[ExtraCommand] = ()) -> int:
    parser = _build_parser(extra_commands)
    # Every refusal is one line after the command and its action, as `nachtwacht control` words
    # them: `nachtwacht release sign: --out: … already exists`.
    said_by = "nachtwacht release"
    try:
        args = parser.parse_args(argv)
        said_by = f"nachtwacht release {args.command}"
        if args.command == "keygen":
            return _keygen(args)
        if args.command == "sign":
            return _sign(args, _clock())
        if args.command in ROOT_COMMANDS:
            return run_root_command(args, _clock())
        if args.command == "verify":
            return _verify(args)
        (command,) = (c for c in extra_commands if c.name == args.command)
        return command.run(args)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except UsageError as exc:
        print(f"{exc.command or said_by}: {exc}", file=sys.stderr)
        return 2
    except ReleaseError as exc:
        print(f"{said_by}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{said_by}: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
