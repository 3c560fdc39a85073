"""`nachtwacht control …`: run and administer the control plane.

    serve                 run the HTTP API (migrates first unless --no-migrate)
    migrate               apply the migrations (--check: apply all to an empty database and back)
    create-org NAME       a new organisation and its panel key (shown once)
    create-panel-key      another panel key for an organisation (shown once)
    enroll-agent          a new agent and its credential (shown once)
    create-operator-key   an operator key (shown once)
    publish-release       check a signed release against the trusted keys and store it
    forecast --date D     the capacity forecast of a local day (which slots will not fit)

Every command takes --database-url (or NACHTWACHT_DATABASE_URL) or --data-dir (the embedded
PostgreSQL; default: the user's data directory). Bad input prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn
from uuid import UUID

from pydantic import TypeAdapter

from control_plane import migrate
from control_plane.accounts.services import AccountService
from control_plane.config import (
    DatabaseLocation,
    ServeSettings,
    load_trusted_keys,
    release_key_paths,
    settings_from_env,
)
from control_plane.database import open_pool
from control_plane.errors import (
    ConfigurationError,
    ControlPlaneError,
    DatabaseUnavailable,
    RequestRefused,
)
from control_plane.forecast.model import PlatformDayForecast
from control_plane.forecast.services import ForecastService, parse_day
from control_plane.forecast.text import render_forecast
from control_plane.releases.services import ReleaseService
from control_plane.startup import opened_database
from control_plane.types import Pool
from ground.clock import ClockConfigError, clock_from_env

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


def _add_database_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        help="an external PostgreSQL 15+ (default: $NACHTWACHT_DATABASE_URL, else embedded)",
    )
    parser.add_argument(
        "--data-dir",
        help="the embedded PostgreSQL's home (default: $NACHTWACHT_DATA_DIR, else user data dir)",
    )


def _add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="nachtwacht control", description="Run and administer the control plane.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    serve = commands.add_parser("serve", help="run the HTTP API")
    _add_database_flags(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="TCP port; 0 picks a free one (8080)")
    serve.add_argument("--no-migrate", action="store_true", help="do not migrate at start-up")
    serve.add_argument("--pool-size", type=int, default=10, help="database connections (10)")
    serve.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes, each with its own pool (the machine's cores)",
    )
    serve.add_argument("--log-level", default="warning", help="uvicorn's log level (warning)")
    serve.add_argument("--timezone", help="store the platform time zone ($NACHTWACHT_TIMEZONE)")
    serve.add_argument(
        "--catch-up-minutes",
        type=int,
        help="store the catch-up window ($NACHTWACHT_CATCH_UP_MINUTES)",
    )
    serve.add_argument("--org-cap", type=int, help="store the per-org cap ($NACHTWACHT_ORG_CAP)")
    serve.add_argument(
        "--global-cap", type=int, help="store the global cap ($NACHTWACHT_GLOBAL_CAP)"
    )

    serve.add_argument(
        "--release-public-key",
        action="append",
        metavar="PATH",
        help="a trusted release key (repeatable; default $NACHTWACHT_RELEASE_PUBLIC_KEYS)",
    )

    publish = commands.add_parser("publish-release", help="check and store a signed release")
    publish.add_argument("manifest", help="manifest.json")
    publish.add_argument("signature", help="manifest.sig")
    publish.add_argument("artifact", help="the build (.tar.gz)")
    publish.add_argument(
        "--release-public-key",
        action="append",
        metavar="PATH",
        help="a trusted release key (repeatable; default $NACHTWACHT_RELEASE_PUBLIC_KEYS)",
    )
    _add_database_flags(publish)
    _add_json_flag(publish)

    migrate_cmd = commands.add_parser("migrate", help="apply the database migrations")
    _add_database_flags(migrate_cmd)
    migrate_cmd.add_argument(
        "--check",
        action="store_true",
        help="apply every migration to a new empty database, undo them, apply again, drop it",
    )
    migrate_cmd.add_argument("--revision", default="head", help="target revision (head)")

    org = commands.add_parser("create-org", help="a new organisation and its panel key")
    org.add_argument("name")
    _add_database_flags(org)
    _add_json_flag(org)

    panel_key = commands.add_parser("create-panel-key", help="another panel key for an org")
    panel_key.add_argument("--org", required=True, help="organisation id")
    panel_key.add_argument("--label", help="what the key is for")
    _add_database_flags(panel_key)
    _add_json_flag(panel_key)

    enroll = commands.add_parser("enroll-agent", help="a new agent and its credential")
    enroll.add_argument("--org", required=True, help="organisation id")
    enroll.add_argument("--name", required=True, help="the agent's name, unique in its org")
    _add_database_flags(enroll)
    _add_json_flag(enroll)

    operator = commands.add_parser("create-operator-key", help="an operator (admin) key")
    operator.add_argument("--label", help="whose key it is")
    _add_database_flags(operator)
    _add_json_flag(operator)

    forecast = commands.add_parser("forecast", help="the capacity forecast of a local day")
    forecast.add_argument("--date", required=True, help="YYYY-MM-DD in the platform's zone")
    _add_database_flags(forecast)
    _add_json_flag(forecast)
    return parser


def _location(args: argparse.Namespace) -> DatabaseLocation:
    return DatabaseLocation.resolve(url=args.database_url, data_dir=args.data_dir)


@contextlib.contextmanager
def _admin_pool(args: argparse.Namespace) -> Iterator[Pool]:
    location = _location(args)
    # The embedded database is this machine's own: bring it up to date. An external one is
    # migrated deliberately, with `nachtwacht control migrate`.
    with opened_database(location, migrate_to_head=location.url is None) as url:
        migrate.require_head(url)
        pool = open_pool(url, min_size=1, max_size=1)
        try:
            yield pool
        finally:
            pool.close()


def _uuid(field_name: str, value: str) -> UUID:
    try:
        return UUID(value)
    except ValueError as exc:
        raise ControlPlaneError(f"{field_name}: {value!r} is not an id (expected a UUID)") from exc


def _emit(args: argparse.Namespace, payload: dict[str, Any], lines: list[str]) -> None:
    if args.json:
        print(json.dumps(payload))
    else:
        print("\n".join(lines))


def _create_org(args: argparse.Namespace) -> int:
    clock = clock_from_env()
    with _admin_pool(args) as pool:
        issued = AccountService(pool).create_org(args.name, now=clock.now())
    _emit(
        args,
        {"org_id": str(issued.org_id), "name": issued.name, "panel_key": issued.panel_key},
        [
            f"organisation {issued.org_id} ({issued.name})",
            f"panel key (shown once, store it now): {issued.panel_key}",
        ],
    )
    return 0


def _create_panel_key(args: argparse.Namespace) -> int:
    org_id = _uuid("--org", args.org)
    with _admin_pool(args) as pool:
        key = AccountService(pool).create_panel_key(org_id, args.label)
    _emit(
        args,
        {"org_id": str(org_id), "panel_key": key},
        [f"panel key for {org_id} (shown once, store it now): {key}"],
    )
    return 0


def _enroll_agent(args: argparse.Namespace) -> int:
    clock = clock_from_env()
    org_id = _uuid("--org", args.org)
    with _admin_pool(args) as pool:
        issued = AccountService(pool).enroll_agent(org_id, args.name, now=clock.now())
    _emit(
        args,
        {
            "agent_id": str(issued.agent_id),
            "org_id": str(issued.org_id),
            "name": issued.name,
            "agent_key": issued.agent_key,
        },
        [
            f"agent {issued.agent_id} ({issued.name}) in organisation {issued.org_id}",
            f"agent credential (shown once, store it now): {issued.agent_key}",
        ],
    )
    return 0


def _create_operator_key(args: argparse.Namespace) -> int:
    with _admin_pool(args) as pool:
        key = AccountService(pool).create_operator_key(args.label)
    _emit(args, {"operator_key": key}, [f"operator key (shown once, store it now): {key}"])
    return 0


def _read_file(field_name: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"{field_name}: cannot read {path!r} ({exc.strerror})") from exc


def _publish_release(args: argparse.Namespace) -> int:
    keys = load_trusted_keys(release_key_paths(args.release_public_key))
    manifest = _read_file("MANIFEST", args.manifest)
    signature = _read_file("SIGNATURE", args.signature)
    artifact = _read_file("ARTIFACT", args.artifact)
    with _admin_pool(args) as pool:
        release = ReleaseService(pool, keys).publish(
            manifest, signature, artifact, now=clock_from_env().now()
        )
    payload = {
        "release_id": str(release.id),
        "version": release.version,
        "manifest_version": release.manifest_version,
        "channel": release.channel,
        "platform": release.platform,
        "key_id": release.key_id,
    }
    _emit(
        args,
        payload,
        [
            f"published {release.version} (manifest_version {release.manifest_version}, "
            f"{release.channel}/{release.platform}), signed by key {release.key_id[:16]}…"
        ],
    )
    return 0


def _migrate(args: argparse.Namespace) -> int:
    with opened_database(_location(args), migrate_to_head=False) as url:
        if args.check:
            applied = migrate.check_migrations(url)
            print(f"ok: {len(applied)} migrations apply to an empty database, undo and re-apply")
            return 0
        migrate.upgrade(url, args.revision)
        print(f"database at revision {migrate.current_revision(url)}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from control_plane.server import serve  # imports uvicorn and FastAPI only when serving

    settings = ServeSettings(
        host=args.host,
        port=args.port,
        database=_location(args),
        migrate=not args.no_migrate,
        pool_size=args.pool_size,
        workers=args.workers,
        log_level=args.log_level,
        platform_settings=settings_from_env(vars(args)),
        release_public_keys=release_key_paths(args.release_public_key),
    )
    return serve(settings)


def _forecast(args: argparse.Namespace) -> int:
    day = parse_day("--date", args.date)
    with _admin_pool(args) as pool:
        view = ForecastService(pool).platform_day(day)
    if args.json:
        print(TypeAdapter(PlatformDayForecast).dump_json(view).decode("utf-8"))
    else:
        print(render_forecast(view))
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": _serve,
    "migrate": _migrate,
    "create-org": _create_org,
    "create-panel-key": _create_panel_key,
    "enroll-agent": _enroll_agent,
    "create-operator-key": _create_operator_key,
    "publish-release": _publish_release,
    "forecast": _forecast,
}


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (ControlPlaneError, ClockConfigError) as exc:
        message = exc.message if isinstance(exc, RequestRefused) else str(exc)
        print(f"nachtwacht control {args.command}: {message}", file=sys.stderr)
        return 1 if isinstance(exc, DatabaseUnavailable) else 2
