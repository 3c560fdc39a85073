"""`nachtwacht control` commands for the rollout: the operators' actions of the HTTP API, from a
shell on a machine that holds the database.

    pin (--org ID | --agent ID) (--version V | --running) [--reason R]
    unpin (--org ID | --agent ID)
    promote RELEASE_ID --reason R      a canary release to `everyone` now (`--wave N`: to wave N)
    halt RELEASE_ID --reason R         claims of it refused, its outstanding tokens revoked
    resume RELEASE_ID --reason R       end its halt
    brake engage --reason R [--release ID] [--keep-outstanding]
    brake release [--release ID]
    brake show

Each calls the service the API's route calls, so the events and their data are the API's; the
actor is the command line (`operator`, named `cli:<login>`): the database is the authority these
commands act with, and no operator key is presented. `--json` prints the API's answer.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from control_plane.brake.services import BrakeService
from control_plane.cli_common import (
    ExclusiveFlags,
    Parser,
    add_admin_flags,
    admin_pool,
    api_document,
    cli_actor,
    emit,
    integer_argument,
    parse_id,
)
from control_plane.errors import ConfigurationError
from control_plane.pins.services import PinService
from control_plane.rollout.halts import HaltView
from control_plane.rollout.services import RolloutService
from ground.clock import clock_from_env

__all__ = ["ROLLOUT_COMMANDS", "add_rollout_commands"]


def add_rollout_commands(commands: Any) -> None:
    _add_pin_commands(commands)
    for name, words in (
        ("promote", "promote a release to a later wave or to everyone now (without the soak)"),
        ("halt", "halt a release: claims of it refused, outstanding tokens revoked"),
        ("resume", "end a release's halt: claims of it granted again"),
    ):
        command = commands.add_parser(name, help=words)
        command.add_argument("release_id", help="the release's id (GET /v1/admin/releases)")
        command.add_argument(
            "--reason", required=True, help="why (required; kept with the action in the trail)"
        )
        if name == "promote":
            command.add_argument(
                "--wave",
                type=integer_argument,
                metavar="N",
                help="move it to this later wave of the plan (default: to everyone)",
            )
        add_admin_flags(command)

    brake = commands.add_parser(
        "brake", help="the operators' brake: of the platform, or of one release (--release)"
    )
    brake.add_argument(
        "action",
        choices=["engage", "release", "show"],
        help="engage it (--reason required), release it, or show the platform's brake",
    )
    brake.add_argument(
        "--release",
        metavar="RELEASE_ID",
        help="brake only this release (default: the platform's brake, every release)",
    )
    brake.add_argument("--reason", help="why updates stop (required to engage; agents show it)")
    brake.add_argument(
        "--keep-outstanding",
        action="store_true",
        help="the platform's brake only: do not revoke tokens granted but not yet used",
    )
    add_admin_flags(brake)


def _add_pin_commands(commands: Any) -> None:
    pin = commands.add_parser("pin", help="pin an organisation or one agent to a version")
    _add_scope(pin)
    version = ExclusiveFlags(pin, required=True)
    version.add_argument(
        "--version", help="the version to offer (a published release, not withdrawn)"
    )
    version.add_argument(
        "--running", action="store_true", help="keep it at whatever version it runs"
    )
    pin.add_argument("--reason", help="why (kept with the pin and in the trail)")
    add_admin_flags(pin)

    unpin = commands.add_parser("unpin", help="remove an organisation's or an agent's pin")
    _add_scope(unpin)
    add_admin_flags(unpin)


def _add_scope(command: Parser) -> None:
    scope = ExclusiveFlags(command, required=True)
    scope.add_argument("--org", help="the organisation's id: every agent of it")
    scope.add_argument("--agent", help="one agent's id (its own pin wins over its organisation's)")


def _scope(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The pin's scope as the service's keyword, and as words."""
    if args.agent is not None:
        agent_id = parse_id("--agent", args.agent)
        return {"agent_id": agent_id}, f"agent {agent_id}"
    org_id = parse_id("--org", args.org)
    return {"org_id": org_id}, f"organisation {org_id}"


def _pin(args: argparse.Namespace) -> int:
    scope, named = _scope(args)
    with admin_pool(args) as pool:
        pinned = PinService(pool).pin(
            **scope,
            version=None if args.running else args.version,
            reason=args.reason,
            actor=cli_actor(),
            now=clock_from_env().now(),
        )
    at = f"to {pinned.version}" if pinned.version else "at the version it runs"
    emit(args, api_document(pinned), [f"pinned {named} {at}"])
    return 0


def _unpin(args: argparse.Namespace) -> int:
    scope, named = _scope(args)
    with admin_pool(args) as pool:
        PinService(pool).unpin(**scope, actor=cli_actor(), now=clock_from_env().now())
    payload = {key: str(value) for key, value in scope.items()}
    emit(args, {**payload, "pinned": False}, [f"unpinned {named}: it follows its rollout again"])
    return 0


def _promote(args: argparse.Namespace) -> int:
    release_id = parse_id("RELEASE_ID", args.release_id)
    with admin_pool(args) as pool:
        change = RolloutService(pool).promote(
            release_id,
            reason=args.reason,
            actor=cli_actor(),
            now=clock_from_env().now(),
            to_wave=args.wave,
        )
    where = "everyone" if change.stage == "everyone" else f"wave {change.wave} of {change.waves}"
    emit(
        args,
        api_document(change),
        [f"promoted {change.version} ({change.channel}/{change.platform}) to {where}"],
    )
    return 0


def _halt_change(args: argparse.Namespace, *, halted: bool) -> HaltView:
    """`halt` and `resume`: the release's halt set or ended, with the operator's reason."""
    release_id = parse_id("RELEASE_ID", args.release_id)
    with admin_pool(args) as pool:
        rollout = RolloutService(pool)
        change = rollout.halt if halted else rollout.resume
        return change(release_id, reason=args.reason, actor=cli_actor(), now=clock_from_env().now())


def _halt(args: argparse.Namespace) -> int:
    halt = _halt_change(args, halted=True)
    emit(
        args,
        api_document(halt),
        [
            f"halted release {halt.release_id}: claims of it are refused until it is resumed; "
            f"{halt.revoked_tokens} outstanding token(s) revoked"
        ],
    )
    return 0


def _resume(args: argparse.Namespace) -> int:
    halt = _halt_change(args, halted=False)
    emit(args, api_document(halt), [f"resumed release {halt.release_id}: claims of it are granted"])
    return 0


def _brake(args: argparse.Namespace) -> int:
    if args.action == "show":
        if args.release is not None or args.reason is not None or args.keep_outstanding:
            raise ConfigurationError(
                "brake show: takes no --release, --reason or --keep-outstanding "
                "(it shows the platform's brake)"
            )
        with admin_pool(args) as pool:
            state = BrakeService(pool).get()
        words = f"engaged ({state.reason})" if state.engaged else "released"
        emit(args, api_document(state), [f"the platform's brake is {words}"])
        return 0
    engaged = args.action == "engage"
    if engaged and args.reason is None:
        raise ConfigurationError(
            "brake engage: --reason is required (say why updates stop; agents show it)"
        )
    if not engaged and args.reason is not None:
        raise ConfigurationError(
            f"--reason: {args.reason!r} is only taken by `brake engage` (releasing keeps no reason)"
        )
    if args.release is not None:
        return _release_brake(args, engaged=engaged)
    with admin_pool(args) as pool:
        change = BrakeService(pool).set(
            engaged=engaged,
            reason=args.reason,
            revoke_outstanding=not args.keep_outstanding,
            actor=cli_actor(),
            now=clock_from_env().now(),
        )
    line = _brake_line("the platform's brake", engaged, change.reason, change.revoked_tokens)
    emit(args, api_document(change), [line])
    return 0


def _release_brake(args: argparse.Namespace, *, engaged: bool) -> int:
    if args.keep_outstanding:
        raise ConfigurationError(
            "--keep-outstanding: only the platform's brake can keep outstanding tokens "
            "(a release's brake always revokes them)"
        )
    release_id = parse_id("--release", args.release)
    with admin_pool(args) as pool:
        brake = BrakeService(pool).set_release(
            release_id,
            engaged=engaged,
            reason=args.reason,
            actor=cli_actor(),
            now=clock_from_env().now(),
        )
    named = f"the brake of {brake.version} ({brake.channel}/{brake.platform})"
    line = _brake_line(named, engaged, brake.reason, brake.revoked_tokens)
    emit(args, api_document(brake), [line])
    return 0


def _brake_line(named: str, engaged: bool, reason: str | None, revoked_tokens: int) -> str:
    if engaged:
        return f"{named} is engaged ({reason}); {revoked_tokens} outstanding token(s) revoked"
    return f"{named} is released"


ROLLOUT_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "pin": _pin,
    "unpin": _unpin,
    "promote": _promote,
    "halt": _halt,
    "resume": _resume,
    "brake": _brake,
}
