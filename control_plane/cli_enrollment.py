"""`nachtwacht control enrollment-token …`: the short-lived tokens a host enrolls with.

    enrollment-token create --org ID [--uses N] [--expires-in 24h] [--name-pattern GLOB]
                            [--label TEXT] [--url URL]
                            a new token (shown once) and the line to run on the host
    enrollment-token list [--org ID] [--active]
                            tokens, newest first: uses left, expiry, state (never a secret)
    enrollment-token revoke ID
                            refused from now on

Like the other commands, these act through the service the API's routes call, on the trail as
the command line (`cli:<login>`). `--url` is the address hosts reach this control plane at: the
command line does not know it, so without it the install line says `URL` for the admin to fill.
The line trusts the newest published trust root (`--trust-root root-N.json`), or the release key
(`--trusted-key release.pub`) while none is published: a file the host gets out of band.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from control_plane.cli_common import (
    Parser,
    add_admin_flags,
    admin_pool,
    api_document,
    cli_actor,
    emit,
    integer_argument,
    optional_id,
    parse_id,
    shown_once,
)
from control_plane.enrollment.rules import (
    DEFAULT_USES,
    EXPIRES_IN_BOUNDS,
    TokenTerms,
    install_command,
    parse_duration,
    trust_file,
)
from control_plane.enrollment.services import EnrollmentService, EnrollmentTokenView
from control_plane.errors import ControlPlaneError, InvalidInput
from control_plane.rollout.unverifiable import unverifiable_releases
from control_plane.trust_roots.services import TrustRootService
from ground.clock import clock_from_env
from ground.contract import format_instant
from ground.control_url import check_control_url, password_hidden

__all__ = ["ENROLLMENT_COMMANDS", "add_enrollment_commands"]

# The install line's address when none is given: a word the admin replaces.
_URL_TO_FILL = "URL"


def add_enrollment_commands(commands: Any) -> None:
    token = commands.add_parser(
        "enrollment-token", help="make, list or revoke the short-lived tokens hosts enroll with"
    )
    actions = token.add_subparsers(dest="enrollment_action", required=True, parser_class=Parser)
    create = actions.add_parser("create", help="a new token (shown once) and its install line")
    create.add_argument("--org", required=True, help="the organisation its agents join")
    create.add_argument(
        "--uses",
        type=integer_argument,
        default=DEFAULT_USES,
        help="how many hosts may use it (1; at most 10000)",
    )
    create.add_argument(
        "--expires-in", default="24h", help="how long it lives: 30m, 24h, 7d (24h; at most 30d)"
    )
    create.add_argument(
        "--name-pattern",
        metavar="GLOB",
        help="a shell-style pattern every agent name must match, e.g. 'web-*.example.internal'",
    )
    create.add_argument("--label", help="what it is for (shown in the list)")
    create.add_argument(
        "--url", help="the address hosts reach this control plane at, for the install line"
    )
    listed = actions.add_parser("list", help="tokens, newest first (never a secret)")
    listed.add_argument("--org", help="only this organisation's")
    listed.add_argument("--active", action="store_true", help="only tokens that can still be used")
    revoke = actions.add_parser("revoke", help="refuse a token from now on")
    revoke.add_argument("id", metavar="ID")
    for command in (create, listed, revoke):
        add_admin_flags(command)


def _terms(args: argparse.Namespace) -> TokenTerms:
    """The flags as a token's terms (a refusal names its flag: `cli_common.in_flags`, and
    quotes the duration as typed, `31d`, not as the minutes it was turned into)."""
    expires_in = parse_duration("expires_in", args.expires_in)
    try:
        return TokenTerms(
            uses=args.uses,
            expires_in=expires_in,
            name_pattern=args.name_pattern,
            label=args.label,
        )
    except InvalidInput as exc:
        if exc.fields.get("field") != "expires_in":
            raise
        raise InvalidInput("expires_in", args.expires_in, EXPIRES_IN_BOUNDS) from exc


def _line(view: EnrollmentTokenView) -> str:
    facts = [
        view.state,
        f"{view.uses_left} of {view.uses_allowed} use(s) left",
        f"expires {format_instant(view.expires_at)}",
        f"organisation {view.org_id}",
    ]
    if view.name_pattern is not None:
        facts.append(f"names {view.name_pattern!r}")
    if view.label is not None:
        facts.append(view.label)
    return f"{view.id}  " + "; ".join(facts)


def _install_url(value: str | None) -> str | None:
    """`--url` as the agent will take it (the same rule): a line it refuses helps nobody."""
    if value is None:
        return None
    try:
        return check_control_url(value)
    except ValueError as exc:
        raise ControlPlaneError(
            f"--url: {password_hidden(value)!r} is not an address an agent can reach this "
            f"control plane at ({exc})"
        ) from exc


def _create(args: argparse.Namespace) -> int:
    org_id = parse_id("--org", args.org)
    terms = _terms(args)
    url = _install_url(args.url)
    with admin_pool(args) as pool:
        issued = EnrollmentService(pool).create(
            org_id, terms, now=clock_from_env().now(), actor=cli_actor()
        )
        newest_root = TrustRootService(
            pool, find_unverifiable=unverifiable_releases
        ).newest_version()
    command = install_command(url or _URL_TO_FILL, issued.secret, newest_root)
    lines = [
        f"enrollment token {_line(issued.token)}",
        shown_once("token", issued.secret),
        f"on the host, as root: {command}",
        f"({trust_file(newest_root)} comes from you, the provider, out of band, never from this"
        " control plane: the host's admin puts it on the host first, in the folder the line is"
        " run from)",
    ]
    if url is None:
        lines.append("(replace URL with the address hosts reach this control plane at, or --url)")
    emit(
        args,
        {
            "token": api_document(issued.token),
            "secret": issued.secret,
            "install_command": command,
        },
        lines,
    )
    return 0


def _list(args: argparse.Namespace) -> int:
    org_id = optional_id("--org", args.org)
    with admin_pool(args) as pool:
        found = EnrollmentService(pool).list(
            org_id=org_id, now=clock_from_env().now(), active_only=args.active
        )
    lines = [_line(view) for view in found.tokens] or ["no enrollment tokens"]
    emit(args, api_document(found), lines)
    return 0


def _revoke(args: argparse.Namespace) -> int:
    token_id = parse_id("ID", args.id)
    with admin_pool(args) as pool:
        view = EnrollmentService(pool).revoke(
            token_id, org_id=None, now=clock_from_env().now(), actor=cli_actor()
        )
    emit(args, api_document(view), [f"revoked: {_line(view)}"])
    return 0


def _enrollment_token(args: argparse.Namespace) -> int:
    actions: dict[str, Callable[[argparse.Namespace], int]] = {
        "create": _create,
        "list": _list,
        "revoke": _revoke,
    }
    return actions[args.enrollment_action](args)


ENROLLMENT_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "enrollment-token": _enrollment_token
}
