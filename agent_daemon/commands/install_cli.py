"""`nachtwacht agent install`: from an installed package to a running agent in one command.

1. every flag is checked as `enroll` checks it (`enroll_cli.staged_enrollment`), and the unit
   directory is writable, before the token is used: a mistake costs no use of it. Without
   `--agent-user`, the managed agent unit's own `User=` is the agent user when the host has it;
2. the enrollment token is exchanged for the agent's own credential (`enrollment_exchange`);
3. the config is written at once — the agent exists on the control plane from then on, so its
   credential must not be lost to anything that fails later — then the first config is fetched
   and cached (when that fails the daemon fetches it at its first minute);
4. unless `--no-start`: the units put in place where no package did (`unit_files`), then
   `systemctl daemon-reload` and `systemctl enable --now nachtwacht-agent.service`. When that
   fails, the lines say what to run once the cause is fixed (exit 1: the agent is enrolled).
"""

from __future__ import annotations

import argparse
import os
import pwd
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from agent_daemon.commands.enroll_cli import (
    StagedEnrollment,
    print_written,
    read_secret,
    staged_enrollment,
)
from agent_daemon.commands.enrollment_exchange import exchange_token
from agent_daemon.commands.unit_files import (
    DAEMON_UNIT,
    MANAGED_AGENT_UNIT,
    SystemctlFailed,
    UnitPlacement,
    managed_agent_user,
    place_units,
    run_systemctl,
)
from agent_daemon.errors import AgentError, ConfigError
from agent_daemon.settings import (
    CONFIG_FILE_NAME,
    SYSTEM_CONFIG_DIR,
    SYSTEM_STATE_DIR,
    AgentPaths,
    AgentSettings,
    is_bearer_text,
)
from ground.contract import ENROLLMENT_TOKEN_PREFIX, EnrolledAgent, EnrollRequest
from ground.contract.messages import MAX_AGENT_NAME_LENGTH

__all__ = ["install"]

# Stands in for the credential while the flags are checked: it is checked as a credential is,
# and never written (the staging copy is removed; the config gets the exchanged one).
_CREDENTIAL_TO_COME = "nwa_exchanged_for_the_enrollment_token"


def install(
    args: argparse.Namespace, paths: AgentPaths, environ: Mapping[str, str] = os.environ
) -> int:
    token = read_secret(args.enrollment_token)
    if not token.startswith(ENROLLMENT_TOKEN_PREFIX) or not is_bearer_text(token):
        raise ConfigError(
            f"--enrollment-token: expected an enrollment token starting with "
            f"{ENROLLMENT_TOKEN_PREFIX}, visible ASCII only (not shown); an agent credential "
            "(nwa_…) goes to `nachtwacht agent enroll --credential`"
        )
    request = _enroll_request(args.name or socket.gethostname())
    systemd_dir = Path(args.systemd_dir)
    if not args.no_start:
        _check_writable(systemd_dir)
    args = _with_the_managed_agents_user(args, systemd_dir)
    with staged_enrollment(args, paths, credential=_CREDENTIAL_TO_COME, environ=environ) as staged:
        enrolled = exchange_token(
            settings=staged.settings,
            token=token,
            request=request,
            clock=staged.clock,
            environ=staged.environ,
        )
        try:
            settings = staged.write(credential=enrolled.credential, agent_id=str(enrolled.agent_id))
        except (AgentError, OSError):
            if not staged.written:
                _keep_the_credential(enrolled)
            raise
    print(f"enrolled agent {enrolled.name} ({enrolled.agent_id}) with {settings.control_url}")
    _first_config(staged, settings)
    print_written(staged)
    if args.no_start:
        print("not started (--no-start); to start it:")
        print(f"  {_start_commands(UnitPlacement())}")
        return 0
    return _start(staged, systemd_dir)


def _keep_the_credential(enrolled: EnrolledAgent) -> None:
    """The agent exists on the control plane, but no file holds its credential: it is shown,
    the only copy there is, with how to use it once the config can be written."""
    print(
        f"the agent {enrolled.name} ({enrolled.agent_id}) exists on the control plane now, but "
        "its config could not be written (below). Its credential, shown this once — keep it "
        f"secret: {enrolled.credential}\n"
        "once the cause is fixed, write the config with it: nachtwacht agent enroll "
        "--credential - (the same flags as this install, without --enrollment-token and --name)",
        file=sys.stderr,
    )


def _enroll_request(name: str) -> EnrollRequest:
    try:
        return EnrollRequest(name=name)
    except ValidationError as exc:
        raise ConfigError(
            f"--name: found {name!r} — expected 1 to {MAX_AGENT_NAME_LENGTH} printable "
            "characters without control characters, e.g. web-07.example.internal"
        ) from exc


def _with_the_managed_agents_user(
    args: argparse.Namespace, systemd_dir: Path
) -> argparse.Namespace:
    """Without `--agent-user`: the managed agent unit's own `User=`, when this host has that user,
    so the build's code does not run as root in a default install."""
    if args.agent_user is not None:
        return args
    user = managed_agent_user(systemd_dir)
    if user is None:
        return args
    try:
        pwd.getpwnam(user)
    except KeyError:
        print(
            f"note: {MANAGED_AGENT_UNIT} runs as {user!r}, which this host does not have yet; the "
            "build's self-test and health command run as root until --agent-user names it"
        )
        return args
    print(f"agent user: {user} (the User= of {MANAGED_AGENT_UNIT}; --agent-user to choose)")
    return argparse.Namespace(**{**vars(args), "agent_user": user})


def _check_writable(folder: Path) -> None:
    if not folder.is_dir():
        raise ConfigError(
            f"--systemd-dir: {folder} is not a directory — expected systemd's unit directory "
            "(or pass --no-start to write the config only)"
        )
    if not os.access(folder, os.W_OK):
        raise ConfigError(
            f"--systemd-dir: {folder} is not writable by this user — run `install` as root (or "
            "pass --no-start to write the config only)"
        )


def _first_config(staged: StagedEnrollment, settings: AgentSettings) -> None:
    try:
        staged.cache(staged.first_config(settings))
    except AgentError as exc:
        # The config is written: the daemon fetches its config at its first minute.
        print(f"first config not fetched yet ({exc}); the daemon fetches it when it starts")


def _start(staged: StagedEnrollment, systemd_dir: Path) -> int:
    placement = UnitPlacement()
    try:
        placement = place_units(systemd_dir)
        run_systemctl("daemon-reload")
        if placement.ours(MANAGED_AGENT_UNIT):
            # Started by the first update (its `current` build does not exist before).
            run_systemctl("enable", MANAGED_AGENT_UNIT)
        run_systemctl("enable", "--now", DAEMON_UNIT)
    except (SystemctlFailed, OSError) as exc:
        _report_units(placement)
        print(f"the agent is enrolled and its config written, but it was not started: {exc}")
        print(f"once that is fixed, start it with: {_start_commands(placement)}")
        return 1
    _report_units(placement)
    _warn_if_the_unit_reads_elsewhere(staged.paths)
    print(f"started {DAEMON_UNIT}; see it with: nachtwacht agent status")
    return 0


def _report_units(placement: UnitPlacement) -> None:
    for path in placement.written:
        print(f"unit written: {path}")
    for path in placement.by_package:
        print(f"unit from the package: {path}")
    for path in placement.by_bundle:
        print(f"unit from the bundle's install.sh: {path}")
    for path in placement.kept:
        print(f"unit kept as it was (not written by install): {path}")


def _start_commands(placement: UnitPlacement) -> str:
    enable_managed = (
        f"systemctl enable {MANAGED_AGENT_UNIT} && " if placement.ours(MANAGED_AGENT_UNIT) else ""
    )
    return f"systemctl daemon-reload && {enable_managed}systemctl enable --now {DAEMON_UNIT}"


def _warn_if_the_unit_reads_elsewhere(paths: AgentPaths) -> None:
    expected = AgentPaths(
        state_dir=SYSTEM_STATE_DIR, config_file=SYSTEM_CONFIG_DIR / CONFIG_FILE_NAME
    )
    if paths != expected:
        print(
            f"note: {DAEMON_UNIT} reads {expected.config_file} and {expected.state_dir}; this "
            f"config is {paths.config_file} (state {paths.state_dir})"
        )
