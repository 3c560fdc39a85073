"""`nachtwacht agent enroll | install | run | status | hold | release-hold | update-now |
uninstall | diagnose | self-update`: the command line read, each verb handed to its module
(`enroll_cli`, `install_cli`, `run_cli`, `status_cli`, `host_verbs_cli`, `uninstall_cli`,
`diagnose_cli`, `self_update_cli`), one error format for them all.

Bad input prints one line naming the problem to stderr and exits 2; never a stack trace.

`run_cli` is imported with this module, so `nachtwacht`'s start-up (`ground.start_up`) covers all
that a long-running daemon holds; the other verbs' modules are imported by their verb only, so the
daemon never holds them (docs/agent_daemon.md, "Footprint").
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
from pathlib import Path

from agent_daemon.commands.network_cli import add_network_options
from agent_daemon.commands.run_cli import run_daemon
from agent_daemon.commands.unit_files import ADMIN_UNIT_DIR
from agent_daemon.errors import AgentError
from agent_daemon.self_update.own_builds import DEFAULT_OWN_ROOT
from agent_daemon.self_update.pending_switch import CHECK_IN_DEADLINE, RESTART_UNIT_COMMAND
from agent_daemon.settings import (
    DEFAULT_INSTALL_ROOT,
    DEFAULT_RESTART_COMMAND,
    AgentPaths,
    AgentSettings,
    resolve_paths,
)
from agent_daemon.updater.updater_settings import FIELD_INFO
from ground.clock import ClockConfigError
from ground.whole_numbers import decimal_number
from signed_release.cli_support import Subcommands
from signed_release.errors import ReleaseError

__all__ = ["main"]

# `update-now` follows the run this long (real seconds): a download and a health check fit.
DEFAULT_FOLLOW_SECONDS = 1800.0


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # raise instead of exit
        raise _UsageError(f"{self.prog}: {message}")


def _seconds(text: str) -> float:
    """A number of seconds above 0, in ASCII digits with an optional decimal point (`nan` would
    follow forever, `-1` not at all; `float` would also take `٣`, `1_0` and ` 5 `)."""
    value = decimal_number(text)
    if value is None or value <= 0:
        raise argparse.ArgumentTypeError(
            f"found {text!r} — expected a number of seconds above 0 in ASCII digits, with at "
            "most one decimal point, e.g. 1800 or 2.5"
        )
    return value


def _default_platform() -> str:
    machine = platform.machine().lower() or "unknown"
    return f"{sys.platform}-{machine}"


def _add_path_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        help=(
            "state directory (default: $STATE_DIRECTORY, else as root /var/lib/nachtwacht-agent, "
            "else the user's state directory)"
        ),
    )
    parser.add_argument(
        "--config",
        help=(
            "config file (default: $CONFIGURATION_DIRECTORY/agent.toml, else as root without "
            "--state-dir /etc/nachtwacht-agent/agent.toml, else <state dir>/agent.toml)"
        ),
    )


def _parser() -> _Parser:
    parser = _Parser(prog="nachtwacht agent", description="the updater on a customer host")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    enroll = commands.add_parser("enroll", help="write the agent's config (checks the credential)")
    _add_enrollment_options(enroll)
    enroll.add_argument(
        "--credential", required=True, help="the agent credential (nwa_…); '-' reads it from stdin"
    )

    install = commands.add_parser(
        "install",
        help="enroll with an enrollment token, put the units in place and start the service",
    )
    install.add_argument(
        "--enrollment-token",
        required=True,
        metavar="TOKEN",
        help="a short-lived enrollment token (nwe_…) from the panel or an operator; '-' reads it "
        "from stdin",
    )
    install.add_argument(
        "--name", help="the agent's name on the control plane (default: this host's name)"
    )
    install.add_argument(
        "--no-start",
        action="store_true",
        help="write the config only: no units, no systemctl (prints what to run)",
    )
    _add_systemd_dir(install)
    _add_enrollment_options(install)

    run = commands.add_parser("run", help="run the daemon (what the systemd unit starts)")
    _add_path_options(run)

    status = commands.add_parser("status", help="schedule, next slot, last runs, daemon state")
    _add_path_options(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    _add_host_commands(commands)
    _add_support_commands(commands)
    _add_self_update_commands(commands)
    return parser


def _add_self_update_commands(commands: Subcommands[_Parser]) -> None:
    self_update = commands.add_parser(
        "self-update", help="the updater's own builds: install one from wheels, switch to it"
    )
    _add_path_options(self_update)
    self_update.add_argument(
        "--own-root",
        default=str(DEFAULT_OWN_ROOT),
        metavar="DIR",
        help=f"the updater's own builds (default {DEFAULT_OWN_ROOT})",
    )
    verbs = self_update.add_subparsers(dest="self_update", required=True, parser_class=_Parser)
    install = verbs.add_parser("install", help="make versions/<v>/venv from a bundle's wheels")
    install.add_argument("--wheels", required=True, metavar="DIR", help="the bundle's wheels/")
    install.add_argument("--version", required=True, help="the nachtwacht_agent wheel's version")
    install.add_argument(
        "--python", default="python3", help="the interpreter the venv is made from"
    )
    switch = verbs.add_parser(
        "switch", help="make an installed build current; it counts once it polls"
    )
    switch.add_argument("version")
    switch.add_argument(
        "--deadline-seconds",
        type=_seconds,
        default=CHECK_IN_DEADLINE.total_seconds(),
        help="the guard goes back unless the new build polls within this long",
    )
    switch.add_argument(
        "--restart-command",
        default=shlex.join(RESTART_UNIT_COMMAND),
        help="restarts the updater's unit ('' for none)",
    )
    verbs.add_parser("status", help="the builds, the links, a pending switch, the last outcome")


def _add_enrollment_options(parser: argparse.ArgumentParser) -> None:
    """What `enroll` and `install` both write into the config."""
    _add_path_options(parser)
    parser.add_argument(
        "--url", required=True, help="the control plane, e.g. https://control.example"
    )
    parser.add_argument(
        "--trusted-key",
        action="append",
        default=[],
        metavar="PATH",
        help="a release.pub to trust (repeat for key rotation); needed without --trust-root",
    )
    parser.add_argument(
        "--trust-root",
        metavar="FILE",
        help="the trust root to hold (root.json, self-signed and not expired): its release keys "
        "are trusted, and its successors are followed through the control plane",
    )
    parser.add_argument("--install-root", default=DEFAULT_INSTALL_ROOT)
    parser.add_argument(
        "--agent-user",
        metavar="USER",
        help="the managed agent's user (its unit's User=): the build's self-test and health "
        "command run as this user instead of root",
    )
    parser.add_argument("--platform", default=_default_platform())
    parser.add_argument("--channel", default="stable")
    parser.add_argument(
        "--restart-command",
        default=shlex.join(DEFAULT_RESTART_COMMAND),
        help="restarts the managed agent service (split like a shell would)",
    )
    parser.add_argument(
        "--health-command",
        help="must succeed and print the running version "
        "(default: <install root>/current/bin/provibr-agent health; not --version, which "
        "prints the installed build's version even while the old process still runs)",
    )
    # The defaults are the settings model's own, so `enroll` and `run` cannot disagree.
    parser.add_argument(
        "--health-deadline-seconds",
        type=_seconds,
        default=FIELD_INFO["health_deadline_seconds"].default,
    )
    parser.add_argument(
        "--request-timeout-seconds",
        type=_seconds,
        default=AgentSettings.model_fields["request_timeout_seconds"].default,
    )
    parser.add_argument("--force", action="store_true", help="replace an existing config")
    add_network_options(parser)


def _add_systemd_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--systemd-dir",
        default=str(ADMIN_UNIT_DIR),
        metavar="DIR",
        help=f"where `install` writes the units no package installed (default {ADMIN_UNIT_DIR})",
    )


def _add_support_commands(commands: Subcommands[_Parser]) -> None:
    uninstall = commands.add_parser(
        "uninstall",
        help="stop and disable the service, remove the units `install` wrote (and with --purge "
        "the config and state)",
    )
    _add_path_options(uninstall)
    _add_systemd_dir(uninstall)
    uninstall.add_argument(
        "--purge",
        action="store_true",
        help="also remove the config and state directories (the agent's credential with them)",
    )
    uninstall.add_argument("--yes", action="store_true", help="do not ask before removing")

    diagnose = commands.add_parser(
        "diagnose",
        help="one .tar.gz for support: versions, the redacted config, status, logs, state and a "
        "connectivity test",
    )
    _add_path_options(diagnose)
    diagnose.add_argument(
        "--out", metavar="FILE", help="the archive (default: nachtwacht-diagnose-<time>.tar.gz)"
    )


def _add_host_commands(commands: Subcommands[_Parser]) -> None:
    hold = commands.add_parser(
        "hold", help="skip scheduled updates until a date or time (the control plane records it)"
    )
    _add_path_options(hold)
    hold.add_argument(
        "--until",
        required=True,
        help="YYYY-MM-DD (that day's 00:00), 'YYYY-MM-DD HH:MM' or HH:MM (the next one), in the "
        "platform's time zone; or an instant with an offset (…Z)",
    )
    hold.add_argument("--reason", help="shown in the panel, e.g. 'database maintenance'")

    release = commands.add_parser("release-hold", help="end a hold: scheduled updates run again")
    _add_path_options(release)

    now = commands.add_parser(
        "update-now", help="ask for an update now and follow it to its outcome (exit 0 or 1)"
    )
    _add_path_options(now)
    now.add_argument(
        "--timeout-seconds",
        type=_seconds,
        default=DEFAULT_FOLLOW_SECONDS,
        help=f"stop following after this long (default {DEFAULT_FOLLOW_SECONDS:g}); the update "
        "goes on",
    )


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    paths = resolve_paths(state_dir=args.state_dir, config_file=args.config, environ=os.environ)
    try:
        return _call_verb(args, paths)
    except (AgentError, ReleaseError, ClockConfigError) as exc:
        # One format for every line (a bad config file may name several fields).
        for line in str(exc).splitlines() or [type(exc).__name__]:
            print(f"nachtwacht agent {args.command}: {line}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"nachtwacht agent {args.command}: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


def _call_verb(args: argparse.Namespace, paths: AgentPaths) -> int:
    if args.command == "run":
        return run_daemon(paths)
    if args.command == "enroll":
        from agent_daemon.commands.enroll_cli import enroll

        return enroll(args, paths)
    if args.command == "install":
        from agent_daemon.commands.install_cli import install

        return install(args, paths)
    if args.command == "uninstall":
        from agent_daemon.commands.uninstall_cli import uninstall

        return uninstall(args, paths)
    if args.command == "diagnose":
        from agent_daemon.commands.diagnose_cli import diagnose

        return diagnose(paths, out=args.out)
    if args.command == "status":
        from agent_daemon.commands.status_cli import show_status

        return show_status(paths, as_json=args.json)
    if args.command == "self-update":
        return _self_update_verb(args, paths)
    from agent_daemon.commands.host_verbs_cli import hold, release_hold, update_now

    if args.command == "hold":
        return hold(paths, until=args.until, reason=args.reason)
    if args.command == "release-hold":
        return release_hold(paths)
    return update_now(paths, timeout_seconds=args.timeout_seconds)


def _self_update_verb(args: argparse.Namespace, paths: AgentPaths) -> int:
    from agent_daemon.commands.self_update_cli import (
        install_own_build,
        show_own_builds,
        switch_own_build,
    )

    own_root = Path(args.own_root)
    if args.self_update == "install":
        return install_own_build(
            own_root=own_root, wheels=Path(args.wheels), version=args.version, python=args.python
        )
    if args.self_update == "switch":
        return switch_own_build(
            paths,
            own_root=own_root,
            version=args.version,
            deadline_seconds=args.deadline_seconds,
            restart_command=args.restart_command,
        )
    return show_own_builds(paths, own_root=own_root)
