"""`nachtwacht control …`: run and administer the control plane.

    serve                 run the HTTP API (migrates first unless --no-migrate)
    migrate               apply the migrations (--check: apply all to an empty database and back)
    after-restore         after restoring the database from a backup: revoke every outstanding
                          token, reset the answers' change feed
    create-org NAME       a new organisation and its panel key (shown once)
    create-panel-key      another panel key for an organisation (shown once)
    enroll-agent          a new agent and its credential (shown once)
    create-operator-key   an operator key (shown once)
    list-credentials      the credentials of the three audiences (never their secrets)
    revoke-credential ID  refuse a credential from now on
    rotate-credential ID  a new secret for the same holder and scope; the old one revoked
    delete-agent ID       take an agent out (credentials revoked; runs and events stay)
    events                the operators' trail: operator actions and schedule changes
    publish-release       check a signed release against the trusted keys and store it
                          (--allow-downgrade: an older version, stored as a rollback release;
                          --product updater: nachtwacht's own agent, refused if signed otherwise)
    withdraw-release ID   withdraw a release (--reason required; --replacement VERSION)
    rollback              roll a channel and platform back to an older signed build
                          (--channel, --platform, --reason required; --to VERSION)
    forecast --date D     the capacity forecast of a local day (which slots will not fit)
    pin, unpin            pin an organisation or an agent to a version, or remove the pin
    promote ID            promote a canary release to everyone now (--reason required)
    halt ID, resume ID    halt a release or end its halt (--reason required)
    brake ACTION          engage, release or show the brake (the platform's, or --release ID)
    trust-root ACTION     publish FILE: store the next signed trust root; list: the versions
                          published and how many agents hold each
    enrollment-token ACTION
                          create --org ID: a short-lived token a host enrolls with (shown
                          once, with its install line); list; revoke ID

Every command takes --database-url (or NACHTWACHT_DATABASE_URL) or --data-dir (the embedded
PostgreSQL; default: the user's data directory). Bad input prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import TypeAdapter

from control_plane import schema_version
from control_plane.accounts.credentials import Audience
from control_plane.accounts.services import IssuedCredential
from control_plane.cli_common import (
    Parser,
    add_admin_flags,
    add_database_flags,
    admin_accounts,
    admin_pool,
    cli_actor,
    command_parser,
    emit,
    in_flags,
    integer_argument,
    location,
    parse_id,
    printed,
    shown_once,
)
from control_plane.cli_credentials import CREDENTIAL_COMMANDS, add_credential_commands
from control_plane.cli_enrollment import ENROLLMENT_COMMANDS, add_enrollment_commands
from control_plane.cli_restore import RESTORE_COMMANDS, add_restore_commands
from control_plane.cli_rollout import ROLLOUT_COMMANDS, add_rollout_commands
from control_plane.cli_trust_roots import TRUST_ROOT_COMMANDS, add_trust_root_commands
from control_plane.config import (
    ServeSettings,
    load_trusted_keys,
    pool_wait_seconds,
    release_key_paths,
    request_bounds,
    settings_from_env,
    webhook_policy,
)
from control_plane.database_fence import fence_for
from control_plane.errors import (
    ConfigurationError,
    ControlPlaneError,
    DatabaseUnavailable,
    quoted,
)
from control_plane.forecast.model import PlatformDayForecast, WaveOutlook
from control_plane.forecast.services import ForecastService, parse_day
from control_plane.forecast.text import render_forecast, render_outlook
from control_plane.releases.services import ReleaseService
from control_plane.startup import opened_database
from ground.clock import ClockConfigError, clock_from_env
from signed_release.artifact import MAX_BUILD_BYTES
from signed_release.bounded_read import read_at_most
from signed_release.errors import ReleaseError
from signed_release.manifest import MAX_MANIFEST_BYTES, parse_manifest
from signed_release.patch_offer import patch_file_name

__all__ = ["main"]


# Longer than any lock wait a migration should impose on the replicas' queries.
MAX_LOCK_TIMEOUT_SECONDS = 600.0


def _lock_timeout(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_LOCK_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} — expected seconds above 0 and at most {MAX_LOCK_TIMEOUT_SECONDS:g}"
        )
    return seconds


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="nachtwacht control", description="Run and administer the control plane.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    _add_serve(commands)
    _add_release_commands(commands)
    _add_rollback_command(commands)
    migrate_cmd = commands.add_parser("migrate", help="apply the database migrations")
    add_database_flags(migrate_cmd)
    migrate_cmd.add_argument(
        "--check",
        action="store_true",
        help="apply every migration to a new empty database, undo them, apply again, drop it",
    )
    migrate_cmd.add_argument("--revision", default="head", help="target revision (head)")
    migrate_cmd.add_argument(
        "--lock-timeout-seconds",
        type=_lock_timeout,
        default=None,
        help="how long a statement waits for a table in use before the migration gives up "
        "(rolled back, to run again); default 5",
    )

    _add_account_commands(commands)
    add_credential_commands(commands)
    add_rollout_commands(commands)
    add_trust_root_commands(commands)
    add_enrollment_commands(commands)
    add_restore_commands(commands)
    forecast = commands.add_parser("forecast", help="the capacity forecast of a local day")
    forecast.add_argument("--date", required=True, help="YYYY-MM-DD in the platform's zone")
    add_admin_flags(forecast)
    return parser


def _add_serve(commands: Any) -> None:
    """`serve`: the HTTP API, its database, its workers and the settings it stores."""
    serve = commands.add_parser("serve", help="run the HTTP API")
    add_database_flags(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument(
        "--port", type=integer_argument, default=8080, help="TCP port; 0 picks a free one (8080)"
    )
    serve.add_argument("--no-migrate", action="store_true", help="do not migrate at start-up")
    serve.add_argument(
        "--pool-size", type=integer_argument, default=10, help="database connections (10)"
    )
    serve.add_argument(
        "--pool-wait-seconds",
        type=float,
        help="how long a request waits for a database connection before answering 503 "
        "database_unavailable (3; $NACHTWACHT_POOL_WAIT_SECONDS)",
    )
    serve.add_argument(
        "--request-lock-timeout-seconds",
        type=float,
        help="how long a request's statement waits for a lock another session holds before it "
        "is cancelled and answered 503 database_unavailable "
        "(2; $NACHTWACHT_REQUEST_LOCK_TIMEOUT_SECONDS)",
    )
    serve.add_argument(
        "--request-statement-timeout-seconds",
        type=float,
        help="how long one statement of a request may run before it is cancelled and answered "
        "503 database_unavailable (5; $NACHTWACHT_REQUEST_STATEMENT_TIMEOUT_SECONDS)",
    )
    serve.add_argument(
        "--workers",
        type=integer_argument,
        default=os.cpu_count() or 1,
        help="worker processes, each with its own pool (the machine's cores)",
    )
    serve.add_argument("--log-level", default="warning", help="uvicorn's log level (warning)")
    serve.add_argument("--timezone", help="store the platform time zone ($NACHTWACHT_TIMEZONE)")
    serve.add_argument(
        "--catch-up-minutes",
        type=integer_argument,
        help="store the catch-up window ($NACHTWACHT_CATCH_UP_MINUTES)",
    )
    serve.add_argument(
        "--grant-margin-seconds",
        type=integer_argument,
        help="store how long before its window closes a slot gets no new token "
        "(60; 0: until the close; $NACHTWACHT_GRANT_MARGIN_SECONDS)",
    )
    serve.add_argument(
        "--org-cap", type=integer_argument, help="store the per-org cap ($NACHTWACHT_ORG_CAP)"
    )
    serve.add_argument(
        "--global-cap", type=integer_argument, help="store the global cap ($NACHTWACHT_GLOBAL_CAP)"
    )
    serve.add_argument(
        "--retention-days",
        type=integer_argument,
        help="store how many days runs, events and notifications are kept "
        "(400; $NACHTWACHT_RETENTION_DAYS)",
    )

    # Named for webhooks first; an organisation's OpenID Connect provider is reached under the
    # same rule, so the older name stays an alias.
    serve.add_argument(
        "--outbound-allow-network",
        "--webhook-allow-network",
        dest="outbound_allow_network",
        action="append",
        metavar="CIDR",
        help="a network the control plane may reach for an organisation (its webhook, its "
        "OpenID Connect provider) besides public addresses, e.g. 127.0.0.0/8 (repeatable; "
        "default $NACHTWACHT_OUTBOUND_ALLOW_NETWORKS, or $NACHTWACHT_WEBHOOK_ALLOW_NETWORKS)",
    )
    _add_release_key_flag(serve)


def _add_release_key_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--release-public-key",
        action="append",
        metavar="PATH",
        help="a trusted release key (repeatable; default $NACHTWACHT_RELEASE_PUBLIC_KEYS)",
    )


def _add_release_commands(commands: Any) -> None:
    """`publish-release` and `withdraw-release`."""
    publish = commands.add_parser("publish-release", help="check and store a signed release")
    publish.add_argument("manifest", help="manifest.json")
    publish.add_argument("signature", help="manifest.sig")
    publish.add_argument(
        "artifact",
        help="the build (.tar.gz); the patches its manifest offers are taken from beside it",
    )
    _add_release_key_flag(publish)
    publish.add_argument(
        "--stage",
        choices=["canary", "everyone"],
        help="the stage it starts in (default: canary when its pair already has a release)",
    )
    publish.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="publish a version older than the pair's newest on purpose (its manifest must be "
        "signed with --allow-downgrade): stored as a rollback release, offered after `rollback`",
    )
    publish.add_argument(
        "--product",
        choices=["agent", "updater"],
        help="the product you mean to publish: refused when the signed manifest names the other "
        "(default: the one the manifest names)",
    )
    add_admin_flags(publish)

    withdraw = commands.add_parser(
        "withdraw-release", help="withdraw a release: no longer offered, its tokens revoked"
    )
    withdraw.add_argument("release_id", help="the release's id (GET /v1/admin/releases)")
    withdraw.add_argument("--reason", required=True, help="why it is withdrawn (kept with it)")
    withdraw.add_argument(
        "--replacement",
        metavar="VERSION",
        help="the version of the same channel and platform to offer instead "
        "(default: the newest release of the pair that is not withdrawn)",
    )
    add_admin_flags(withdraw)


def _add_rollback_command(commands: Any) -> None:
    """`rollback`: a pair back to an older build, through a signed downgrade release."""
    rollback = commands.add_parser(
        "rollback",
        help="roll a channel and platform back to an older build signed as a downgrade",
    )
    rollback.add_argument("--channel", required=True, help="e.g. stable")
    rollback.add_argument("--platform", required=True, help="e.g. linux-x86_64")
    rollback.add_argument(
        "--to",
        metavar="VERSION",
        help="the version to go back to (default: the newest older one neither withdrawn nor "
        "halted)",
    )
    rollback.add_argument("--reason", required=True, help="why (kept in the trail)")
    rollback.add_argument(
        "--stage",
        choices=["canary", "everyone"],
        default="everyone",
        help="the stage the older build is offered at (default: everyone)",
    )
    rollback.add_argument(
        "--product",
        choices=["agent", "updater"],
        default="agent",
        help="the product line: the managed agent (default) or nachtwacht's own agent",
    )
    add_admin_flags(rollback)


def _add_account_commands(commands: Any) -> None:
    """`create-org`, `create-panel-key`, `enroll-agent`, `create-operator-key`."""
    org = commands.add_parser("create-org", help="a new organisation and its panel key")
    org.add_argument("name")
    add_admin_flags(org)

    panel_key = commands.add_parser("create-panel-key", help="another panel key for an org")
    panel_key.add_argument("--org", required=True, help="organisation id")
    _add_key_name_flag(panel_key)
    add_admin_flags(panel_key)

    enroll = commands.add_parser("enroll-agent", help="a new agent and its credential")
    enroll.add_argument("--org", required=True, help="organisation id")
    enroll.add_argument("--name", required=True, help="the agent's name, unique in its org")
    add_admin_flags(enroll)

    operator = commands.add_parser("create-operator-key", help="an operator (admin) key")
    _add_key_name_flag(operator)
    add_admin_flags(operator)


def _add_key_name_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--name", "--label", dest="name", help="who holds the key (a person or a system)"
    )


def _create_org(args: argparse.Namespace) -> int:
    clock = clock_from_env()
    with admin_accounts(args) as accounts:
        issued = accounts.create_org(args.name, now=clock.now(), actor=cli_actor())
    emit(
        args,
        {"org_id": str(issued.org_id), "name": issued.name, "panel_key": issued.panel_key},
        [
            f"organisation {issued.org_id} ({issued.name})",
            shown_once("panel key", issued.panel_key),
        ],
    )
    return 0


def _issue_key(
    args: argparse.Namespace, audience: Audience, *, org_id: UUID | None = None
) -> IssuedCredential:
    """A panel or operator key named by `--name`, or by its audience when none is given."""
    with admin_accounts(args) as accounts:
        return accounts.issue(
            audience,
            name=args.name or f"{audience.value} key",
            org_id=org_id,
            now=clock_from_env().now(),
            actor=cli_actor(),
        )


def _create_panel_key(args: argparse.Namespace) -> int:
    org_id = parse_id("--org", args.org)
    issued = _issue_key(args, Audience.PANEL, org_id=org_id)
    emit(
        args,
        {
            "org_id": str(org_id),
            "credential_id": str(issued.credential.id),
            "name": issued.credential.name,
            "panel_key": issued.secret,
        },
        [shown_once(f"panel key for {org_id}", issued.secret)],
    )
    return 0


def _enroll_agent(args: argparse.Namespace) -> int:
    clock = clock_from_env()
    org_id = parse_id("--org", args.org)
    with admin_accounts(args) as accounts:
        issued = accounts.enroll_agent(org_id, args.name, now=clock.now(), actor=cli_actor())
    emit(
        args,
        {
            "agent_id": str(issued.agent_id),
            "org_id": str(issued.org_id),
            "name": issued.name,
            "agent_key": issued.agent_key,
        },
        [
            f"agent {issued.agent_id} ({issued.name}) in organisation {issued.org_id}",
            shown_once("agent credential", issued.agent_key),
        ],
    )
    return 0


def _create_operator_key(args: argparse.Namespace) -> int:
    issued = _issue_key(args, Audience.OPERATOR)
    emit(
        args,
        {
            "credential_id": str(issued.credential.id),
            "name": issued.credential.name,
            "operator_key": issued.secret,
        },
        [shown_once("operator key", issued.secret)],
    )
    return 0


def _read_file(field_name: str, path: str, limit: int, what: str) -> bytes:
    """The file's bytes, read no further than `limit` (a wrong file can be a disk image, or a
    device that never ends): one larger is refused as `what` says it cannot be."""
    try:
        data = read_at_most(Path(path), limit)
    except OSError as exc:
        raise ConfigurationError(f"{field_name}: cannot read {path!r} ({exc.strerror})") from exc
    if len(data) > limit:
        raise ConfigurationError(f"{field_name}: {path!r} is larger than {what}")
    return data


def _read_release_files(args: argparse.Namespace) -> tuple[bytes, bytes, bytes]:
    """MANIFEST, SIGNATURE and ARTIFACT, each read within what it can be: the artifact within the
    length its manifest names (a manifest that cannot be read names none, nor one naming a build
    larger than the platform takes: publishing refuses it before any artifact is looked at)."""
    manifest = _read_file(
        "MANIFEST", args.manifest, MAX_MANIFEST_BYTES, f"any manifest ({MAX_MANIFEST_BYTES} bytes)"
    )
    signature = _read_file(
        "SIGNATURE",
        args.signature,
        MAX_MANIFEST_BYTES,
        f"any signature ({MAX_MANIFEST_BYTES} bytes)",
    )
    try:
        length = parse_manifest(manifest).length
    except ReleaseError:
        return manifest, signature, b""
    if length > MAX_BUILD_BYTES:  # never read: publishing refuses the manifest's length
        return manifest, signature, b""
    artifact = _read_file(
        "ARTIFACT",
        args.artifact,
        length,
        f"the manifest's length of {length} bytes (not the build it was signed for)",
    )
    return manifest, signature, artifact


def patches_beside(artifact: Path, manifest: bytes) -> tuple[dict[str, bytes], list[str]]:
    """The patches the manifest offers that `nachtwacht release sign --base` wrote beside the
    artifact, by base tar sha256, and a line per offered patch saying whether it goes with the
    release or is missing (hosts on that base then download the full build). An unreadable
    manifest gives none: publishing refuses it."""
    try:
        offers = parse_manifest(manifest).patches
    except ReleaseError:
        return {}, []
    found: dict[str, bytes] = {}
    lines: list[str] = []
    for offer in offers:
        path = artifact.parent / patch_file_name(offer.base_tar_sha256)
        if offer.length > MAX_BUILD_BYTES:  # never read: publishing refuses the manifest
            continue
        if path.is_file():
            found[offer.base_tar_sha256] = _read_file(
                "PATCH", str(path), offer.length, f"the manifest's length of {offer.length} bytes"
            )
            lines.append(f"patch from {offer.base_version}: {path.name} ({offer.length} bytes)")
        else:
            lines.append(
                f"patch from {offer.base_version}: {path} not found, skipped: hosts on"
                f" {offer.base_version} download the full build"
            )
    return found, lines


def _publish_release(args: argparse.Namespace) -> int:
    keys = load_trusted_keys(release_key_paths(args.release_public_key))
    manifest, signature, artifact = _read_release_files(args)
    patches, patch_lines = patches_beside(Path(args.artifact), manifest)
    now = clock_from_env().now()
    with admin_pool(args) as pool:
        release = ReleaseService(pool, keys).publish(
            manifest,
            signature,
            artifact,
            now=now,
            actor=cli_actor(),
            stage=args.stage,
            allow_downgrade=args.allow_downgrade,
            patches=patches,
            product=args.product,
        )
        outlook = (
            None
            if release.already_published
            else ForecastService(pool).publish_outlook(release.id, now=now)
        )
    payload = {
        "release_id": str(release.id),
        "version": release.version,
        "manifest_version": release.manifest_version,
        "channel": release.channel,
        "platform": release.platform,
        "key_id": release.key_id,
        "already_published": release.already_published,
        "stage": release.stage,
        "wave": release.wave,
        "waves": release.waves,
        "first_wave": None
        if outlook is None
        else TypeAdapter(WaveOutlook).dump_python(outlook, mode="json"),
        "current": release.current,
        "downgrade_from": release.downgrade_from,
        "product": release.product,
        "replaces_release_id": None
        if release.replaces_release_id is None
        else str(release.replaces_release_id),
        "replaces_manifest_version": release.replaces_manifest_version,
        "replaced_tokens_revoked": release.replaced_tokens_revoked,
    }
    verb = "already published" if release.already_published else "published"
    named = release.version + (" (updater)" if release.product == "updater" else "")
    lines = [
        f"{verb} {named} (manifest_version {release.manifest_version}, "
        f"{release.channel}/{release.platform}), signed by key {release.key_id[:16]}…"
    ]
    if release.replaces_manifest_version is not None:
        tokens = (
            "downloads already granted go on: its key is still trusted"
            if release.replaced_tokens_revoked is None
            else f"{release.replaced_tokens_revoked} outstanding token(s) revoked: the newest "
            "trust root no longer names its key"
        )
        lines.append(
            f"the same build signed again: it replaces manifest_version "
            f"{release.replaces_manifest_version} (withdrawn; {tokens}) as "
            f"the pair's current release, in its stage and wave; hosts running {release.version} "
            "have nothing to do"
        )
    if not release.current:
        lines.append(
            "not offered to anyone yet: a downgrade from "
            + (release.downgrade_from or "a newer release")
            + f"; `nachtwacht control rollback --channel {release.channel} --platform "
            f"{release.platform} --to {release.version} --reason …` makes it current"
        )
    if outlook is not None:
        lines.append(render_outlook(outlook))
    if not release.already_published:
        lines.extend(patch_lines)
    emit(args, payload, lines)
    return 0


def _rollback(args: argparse.Namespace) -> int:
    with admin_pool(args) as pool:
        # Rolling back checks no signature (the stored manifest was checked at publication).
        rolled = ReleaseService(pool, {}).roll_back(
            channel=args.channel,
            platform=args.platform,
            to=args.to,
            reason=args.reason,
            stage=args.stage,
            now=clock_from_env().now(),
            actor=cli_actor(),
            product=args.product,
        )
    payload = {
        "product": rolled.product,
        "channel": rolled.channel,
        "platform": rolled.platform,
        "reason": rolled.reason,
        "from_release_id": str(rolled.from_release_id),
        "from_version": rolled.from_version,
        "from_manifest_version": rolled.from_manifest_version,
        "to_release_id": str(rolled.to_release_id),
        "to_version": rolled.to_version,
        "to_manifest_version": rolled.to_manifest_version,
        "stage": rolled.stage,
        "revoked_tokens": rolled.revoked_tokens,
    }
    emit(
        args,
        payload,
        [
            f"rolled {rolled.channel}/{rolled.platform}"
            f"{' (updater)' if rolled.product == 'updater' else ''} back from "
            f"{rolled.from_version} to "
            f"{rolled.to_version} (manifest_version {rolled.to_manifest_version}, stage "
            f"{rolled.stage}); {rolled.from_version} withdrawn, {rolled.revoked_tokens} "
            "outstanding token(s) revoked; hosts on it go back at their next slot"
        ],
    )
    return 0


def _withdraw_release(args: argparse.Namespace) -> int:
    release_id = parse_id("RELEASE_ID", args.release_id)
    with admin_pool(args) as pool:
        # Withdrawing checks no signature: no trusted keys needed.
        withdrawn = ReleaseService(pool, {}).withdraw(
            release_id,
            reason=args.reason,
            replacement=args.replacement,
            now=clock_from_env().now(),
            actor=cli_actor(),
        )
    payload = {
        "release_id": str(withdrawn.id),
        "version": withdrawn.version,
        "channel": withdrawn.channel,
        "platform": withdrawn.platform,
        "reason": withdrawn.reason,
        "current_version": withdrawn.current_version,
        "revoked_tokens": withdrawn.revoked_tokens,
    }
    now_offered = withdrawn.current_version or "nothing"
    emit(
        args,
        payload,
        [
            f"withdrew {withdrawn.version} ({withdrawn.channel}/{withdrawn.platform}); "
            f"{withdrawn.revoked_tokens} outstanding token(s) revoked; the pair now offers "
            f"{now_offered}"
        ],
    )
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from control_plane import migrate  # only here: Alembic is heavy for the other commands

    if not migrate.is_revision(args.revision):
        raise ConfigurationError(
            f"--revision: {quoted(args.revision)} is not a revision of this release (expected "
            f"head or a revision id, e.g. {migrate.head_revision()})"
        )
    with opened_database(location(args), migrate_to_head=False) as url:
        # Migrating is part of finishing a restore: before `after-restore`, which needs the head.
        fence_for(url).allow_unfinished_restore()
        if args.check:
            applied = migrate.check_migrations(url)
            printed(f"ok: {len(applied)} migrations apply to an empty database, undo and re-apply")
            return 0
        lock_timeout = args.lock_timeout_seconds or migrate.LOCK_TIMEOUT_SECONDS
        migrate.upgrade(url, args.revision, lock_timeout_seconds=lock_timeout)
        current = migrate.current_revision(url)
        newer = schema_version.is_newer_than_head(current)
        printed(
            f"database at revision {current}"
            + (
                f", newer than this release's {migrate.head_revision()}: left as it is"
                if newer
                else ""
            )
        )
    return 0


def _serve(args: argparse.Namespace) -> int:
    from ground.start_up import start_up_imports

    with start_up_imports():
        from control_plane.server import serve  # imports uvicorn and FastAPI only when serving

    settings = ServeSettings(
        host=args.host,
        port=args.port,
        database=location(args),
        migrate=not args.no_migrate,
        pool_size=args.pool_size,
        pool_wait_seconds=pool_wait_seconds(args.pool_wait_seconds),
        request_bounds=request_bounds(
            args.request_lock_timeout_seconds, args.request_statement_timeout_seconds
        ),
        workers=args.workers,
        log_level=args.log_level,
        platform_settings=settings_from_env(vars(args)),
        release_public_keys=release_key_paths(args.release_public_key),
        webhook_policy=webhook_policy(args.outbound_allow_network),
    )
    return serve(settings)


def _forecast(args: argparse.Namespace) -> int:
    day = parse_day("--date", args.date)
    with admin_pool(args) as pool:
        view = ForecastService(pool).platform_day(day)
    if args.json:
        printed(TypeAdapter(PlatformDayForecast).dump_json(view).decode("utf-8"))
    else:
        printed(render_forecast(view))
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": _serve,
    "migrate": _migrate,
    "create-org": _create_org,
    "create-panel-key": _create_panel_key,
    "enroll-agent": _enroll_agent,
    "create-operator-key": _create_operator_key,
    "publish-release": _publish_release,
    "withdraw-release": _withdraw_release,
    "rollback": _rollback,
    "forecast": _forecast,
    **CREDENTIAL_COMMANDS,
    **ROLLOUT_COMMANDS,
    **TRUST_ROOT_COMMANDS,
    **ENROLLMENT_COMMANDS,
    **RESTORE_COMMANDS,
}


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (ControlPlaneError, ClockConfigError) as exc:
        # Named as typed, action included: `nachtwacht control enrollment-token create: …`.
        printed(
            f"{command_parser(args).prog}: {in_flags(args, argv, exc)}",
            file=sys.stderr,
        )
        return 1 if isinstance(exc, DatabaseUnavailable) else 2
