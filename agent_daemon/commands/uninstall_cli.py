"""`nachtwacht agent uninstall [--purge] [--yes]`: the agent taken off this host.

It stops and disables the services, removes the units `install` wrote (`unit_files`: never a
package's — the package manager removes those — nor the administrator's own), and with `--purge`
the config and the state directory, the agent's credential with them. It never removes the managed
agent's builds under the install root: they are the product the host runs, not the updater's.

Run twice, the second run says there is nothing left. It asks before removing anything unless
`--yes`; without a terminal to ask on, `--yes` is required. `--purge` refuses while a daemon still
holds the state directory (one started by hand, or a service systemctl could not stop): it would
go on updating with the credential it holds and write its state again.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tomllib
from pathlib import Path

from agent_daemon.commands.agent_parts import CONFIG_CACHE_NAME, STATE_FILE_NAME
from agent_daemon.commands.unit_files import (
    DAEMON_UNIT,
    PACKAGE_NAME,
    UNIT_NAMES,
    SystemctlFailed,
    package_unit,
    run_systemctl,
    systemctl_succeeds,
    written_by_bundle,
    written_by_install,
)
from agent_daemon.errors import ConfigError
from agent_daemon.minute.daemon_loop import daemon_running
from agent_daemon.settings import (
    CONFIG_FILE_NAME,
    DEFAULT_INSTALL_ROOT,
    MAX_CONFIG_BYTES,
    SYSTEM_CONFIG_DIR,
    UPDATER_DIR_NAME,
    AgentPaths,
)
from ground.planted_files import read_regular

__all__ = ["uninstall"]

# A folder holding one of these is an agent's state directory: `--purge` removes it whole. Any
# other folder named by mistake (`--state-dir /`) is left alone.
_STATE_MARKERS = (CONFIG_FILE_NAME, STATE_FILE_NAME, CONFIG_CACHE_NAME, UPDATER_DIR_NAME)


def uninstall(args: argparse.Namespace, paths: AgentPaths) -> int:
    systemd_dir = Path(args.systemd_dir)
    ours = [systemd_dir / name for name in UNIT_NAMES if written_by_install(systemd_dir / name)]
    packaged = [path for name in UNIT_NAMES if (path := package_unit(name)) is not None]
    bundled = [systemd_dir / name for name in UNIT_NAMES if written_by_bundle(systemd_dir / name)]
    install_root = _install_root(paths)
    stop = _services_to_stop(ours, systemd_dir)
    purged = _purge_targets(paths) if args.purge else []
    if not (ours or stop or purged):
        print(f"nothing left to uninstall{_what_stays(paths, packaged, bundled, purge=args.purge)}")
        return 0
    if purged and not stop:
        _refuse_while_a_daemon_runs(paths)
    for service in stop:
        print(f"stop and disable {service}")
    for path in ours:
        print(f"remove {path}")
    for path in purged:
        print(f"remove {path}{'/' if path.is_dir() else ''}")
    if not args.yes:
        _confirm()
    failed = False
    if stop:
        try:
            run_systemctl("disable", "--now", *stop)
        except SystemctlFailed as exc:
            print(f"not stopped: {exc}", file=sys.stderr)
            failed = True
        if purged:
            _refuse_while_a_daemon_runs(paths)
    for path in ours:
        path.unlink(missing_ok=True)
    if ours:
        try:
            run_systemctl("daemon-reload")
        except SystemctlFailed as exc:
            print(f"units removed, but: {exc}", file=sys.stderr)
            failed = True
    for path in purged:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    print(f"uninstalled{_what_stays(paths, packaged, bundled, purge=args.purge)}")
    print(
        f"the managed agent's builds under {install_root} are kept (uninstall never removes "
        f"them); remove them yourself when nothing runs them: rm -r {install_root}"
    )
    return 1 if failed else 0


def _refuse_while_a_daemon_runs(paths: AgentPaths) -> None:
    pid = daemon_running(paths.state_dir)
    if pid is None:
        return
    running = f"pid {pid}" if pid > 0 else "its pid unknown"
    raise ConfigError(
        f"--purge: a daemon still runs on {paths.state_dir} ({running}) — expected none: it "
        f"would go on with the credential it holds; stop it first (systemctl stop {DAEMON_UNIT}, "
        "or end the `nachtwacht agent run` started by hand); nothing was removed"
    )


def _services_to_stop(ours: list[Path], systemd_dir: Path) -> list[str]:
    """The units `install` wrote, and the daemon's unit from a package or the administrator
    while systemd has it enabled or running."""
    services = [path.name for path in ours]
    daemon_elsewhere = DAEMON_UNIT not in services and (
        package_unit(DAEMON_UNIT) is not None or (systemd_dir / DAEMON_UNIT).exists()
    )
    if daemon_elsewhere and (
        systemctl_succeeds("is-enabled", "--quiet", DAEMON_UNIT)
        or systemctl_succeeds("is-active", "--quiet", DAEMON_UNIT)
    ):
        services.append(DAEMON_UNIT)
    return services


def _purge_targets(paths: AgentPaths) -> list[Path]:
    targets: list[Path] = []
    state = paths.state_dir
    if state.is_symlink():
        # Which to remove (the link, the folder it points at, or both) is the admin's to say.
        target = state.resolve()
        raise ConfigError(
            f"--state-dir: {state} is a symbolic link to {target} — expected the folder itself "
            f"(name it: --state-dir {target}); nothing was removed"
        )
    if state.is_dir() and any((state / name).exists() for name in _STATE_MARKERS):
        targets.append(state)
    config_dir = paths.config_file.parent
    if config_dir == SYSTEM_CONFIG_DIR and config_dir.is_dir():
        # The service's configuration directory: the trusted keys in it go with the config.
        targets.append(config_dir)
    elif paths.config_file.exists() and config_dir != state:
        targets.append(paths.config_file)
    return targets


def _what_stays(
    paths: AgentPaths, packaged: list[Path], bundled: list[Path], *, purge: bool
) -> str:
    notes = []
    if not purge and (paths.config_file.exists() or paths.state_dir.is_dir()):
        notes.append(
            f"the config {paths.config_file} and the state {paths.state_dir} stay (--purge "
            "removes them)"
        )
    if packaged:
        notes.append(
            f"the units {', '.join(map(str, packaged))} belong to the {PACKAGE_NAME} package: "
            f"remove it with `apt remove {PACKAGE_NAME}`"
        )
    if bundled:
        notes.append(
            f"the units {', '.join(map(str, bundled))} came with the offline bundle's "
            "install.sh, like /opt/nachtwacht and /usr/local/bin/nachtwacht: remove them by hand "
            '(docs/agent_daemon.md, "Removing it")'
        )
    return "".join(f"; {note}" for note in notes)


def _install_root(paths: AgentPaths) -> str:
    """The install root the config names (read leniently: uninstall must work with a broken
    config too), else the default. A config that is not a regular file (a named pipe) is not
    read: it would hold the command forever; nor one larger than any config (`MAX_CONFIG_BYTES`)."""
    try:
        data = read_regular(paths.config_file, MAX_CONFIG_BYTES, follow_links=True)
        if len(data) > MAX_CONFIG_BYTES:
            return DEFAULT_INSTALL_ROOT
        document = tomllib.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return DEFAULT_INSTALL_ROOT
    value = document.get("install_root")
    return value if isinstance(value, str) and value else DEFAULT_INSTALL_ROOT


def _confirm() -> None:
    if not sys.stdin.isatty():
        raise ConfigError("--yes: not given, and there is no terminal to ask on — expected --yes")
    answer = input("continue? [y/N] ").strip().lower()
    if answer not in {"y", "yes"}:
        raise ConfigError("--yes: not confirmed; nothing was changed")
