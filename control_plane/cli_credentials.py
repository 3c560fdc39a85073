"""`nachtwacht control` commands for credentials' lifecycle, deleting an agent, and the trail.

    list-credentials [--audience A] [--org ID] [--agent ID] [--all]
    revoke-credential ID        refused from the next request on
    rotate-credential ID        a new secret (shown once) for the same holder; the old revoked
    delete-agent ID             credentials revoked; runs and events stay for the operators
    events [--org ID] [--agent ID] [--kind K] [--actor-kind K] [--limit N]

Each prints one JSON object with `--json`; the actions are on the trail as `cli:<login>`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from control_plane.accounts.credentials import Audience
from control_plane.accounts.services import CredentialView
from control_plane.cli_common import (
    add_admin_flags,
    admin_accounts,
    admin_pool,
    api_document,
    cli_actor,
    emit,
    integer_argument,
    optional_id,
    parse_id,
    shown_once,
)
from control_plane.errors import ConfigurationError
from control_plane.events.services import (
    MAX_EVENTS_PAGE,
    EventFilter,
    EventService,
    trail_instant,
)
from ground.clock import clock_from_env
from ground.instants import format_instant

__all__ = ["CREDENTIAL_COMMANDS", "add_credential_commands"]


def add_credential_commands(commands: Any) -> None:
    listing = commands.add_parser("list-credentials", help="credentials (never their secrets)")
    listing.add_argument("--audience", choices=[audience.value for audience in Audience])
    listing.add_argument("--org", help="only this organisation's")
    listing.add_argument("--agent", help="only this agent's")
    listing.add_argument("--all", action="store_true", help="revoked ones too")
    for name, words in (
        ("revoke-credential", "refuse a credential from now on"),
        ("rotate-credential", "a new secret for the same holder; the old one revoked"),
        ("delete-agent", "delete an agent (its runs and events stay)"),
    ):
        command = commands.add_parser(name, help=words)
        command.add_argument("id")
        add_admin_flags(command)
    events = commands.add_parser("events", help="the operators' trail, newest first")
    events.add_argument("--org")
    events.add_argument("--agent")
    events.add_argument("--kind", help='an event kind, or a family ending in "." (credential.)')
    events.add_argument(
        "--actor-kind", choices=["schedule", "user", "agent", "operator", "control_plane"]
    )
    events.add_argument(
        "--since", metavar="INSTANT", help="from this instant on, e.g. 2026-11-30T01:45:00Z"
    )
    events.add_argument("--until", metavar="INSTANT", help="before this instant")
    events.add_argument(
        "--before-id",
        type=integer_argument,
        metavar="ID",
        help="the next page: events older than this one (the last line of a full page names it)",
    )
    events.add_argument("--limit", type=integer_argument, default=50)
    for command in (listing, events):
        add_admin_flags(command)


def _line(view: CredentialView) -> str:
    scope = view.agent_id or view.org_id or "platform"
    state = f"revoked {format_instant(view.revoked_at)}" if view.revoked_at else "active"
    return f"{view.id}  {view.audience.value:<8}  {view.name}  ({scope}; {state})"


def _list(args: argparse.Namespace) -> int:
    # The flags are judged before the database is reached: a bad id is named whatever its state.
    org_id = optional_id("--org", args.org)
    agent_id = optional_id("--agent", args.agent)
    with admin_accounts(args) as accounts:
        found = accounts.list_credentials(
            audience=None if args.audience is None else Audience(args.audience),
            org_id=org_id,
            agent_id=agent_id,
            include_revoked=args.all,
        )
    lines = [_line(view) for view in found.credentials] or ["no credentials"]
    emit(args, api_document(found), lines)
    return 0


def _revoke(args: argparse.Namespace) -> int:
    credential_id = parse_id("ID", args.id)
    with admin_accounts(args) as accounts:
        view = accounts.revoke(credential_id, now=clock_from_env().now(), actor=cli_actor())
    emit(args, api_document(view), [f"revoked: {_line(view)}"])
    return 0


def _rotate(args: argparse.Namespace) -> int:
    credential_id = parse_id("ID", args.id)
    with admin_accounts(args) as accounts:
        issued = accounts.rotate(credential_id, now=clock_from_env().now(), actor=cli_actor())
    emit(
        args,
        api_document(issued),
        [
            f"rotated {credential_id}: {_line(issued.credential)}",
            shown_once("new secret", issued.secret),
        ],
    )
    return 0


def _delete_agent(args: argparse.Namespace) -> int:
    agent_id = parse_id("ID", args.id)
    with admin_accounts(args) as accounts:
        deleted = accounts.delete_agent(agent_id, now=clock_from_env().now(), actor=cli_actor())
    emit(
        args,
        api_document(deleted),
        [
            f"deleted agent {deleted.agent_id} ({deleted.name}); "
            f"{deleted.revoked_credentials} credential(s) revoked, its history kept"
        ],
    )
    return 0


def _events(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_EVENTS_PAGE:
        raise ConfigurationError(
            f"--limit: {args.limit} is out of range (expected 1 to {MAX_EVENTS_PAGE})"
        )
    query = EventFilter(
        org_id=optional_id("--org", args.org),
        agent_id=optional_id("--agent", args.agent),
        kind=args.kind,
        actor_kind=args.actor_kind,
        since=trail_instant("since", args.since),
        until=trail_instant("until", args.until),
        before_id=args.before_id,
        limit=args.limit,
    )
    with admin_pool(args) as pool:
        page = EventService(pool).trail(query)
    lines = [
        f"{event.at.isoformat()}  #{event.id}  {event.kind}  by {event.actor.kind} "
        f"{event.actor.name or event.actor.id or '-'}  {json.dumps(event.data, default=str)}"
        for event in page.events
    ] or ["no events"]
    if page.next_before_id is not None:
        lines.append(f"(more: the same command with --before-id {page.next_before_id})")
    emit(args, api_document(page), lines)
    return 0


CREDENTIAL_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list-credentials": _list,
    "revoke-credential": _revoke,
    "rotate-credential": _rotate,
    "delete-agent": _delete_agent,
    "events": _events,
}
