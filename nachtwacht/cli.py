"""The `nachtwacht` command. Each subcommand imports its part only when it is used, so an agent host
never imports the control plane (and needs none of its dependencies)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

from ground.clock import ClockConfigError
from ground.start_up import start_up_imports

# subcommand -> (module, one-line summary); each module has `main(argv: list[str]) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("nachtwacht.plan_cli", "preview an update schedule's slots and daylight-saving notes"),
    "control": ("control_plane.cli", "run and administer the control plane"),
    "agent": (
        "agent_daemon.commands.cli",
        "install, enroll, run, inspect and remove the updater on a customer host",
    ),
    "release": ("nachtwacht.release_cli", "make a release key, sign a build"),
    "demo": ("nachtwacht.demo", "run one night for a small fleet on a fast clock"),
}


def _usage() -> str:
    lines = ["usage: nachtwacht [--version] COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<9} {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    lines += ["", "Run `nachtwacht COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        # A command line without a command is a mistake, not a request for help: exit 2, so a
        # script that lost its argument fails instead of "succeeding" with a usage text.
        print(f"nachtwacht: a command is required\n\n{_usage()}", file=sys.stderr)
        return 2
    if args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    if args[0] in {"-V", "--version"}:
        print(f"nachtwacht {_installed_version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"nachtwacht: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name = SUBCOMMANDS[name][0]
    try:
        with start_up_imports():
            module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and _is_part_of(module_name, exc.name):
            # The command's own code is not installed: the agent's package leaves out the
            # control plane and the demo on purpose. One line, never a traceback.
            print(
                f"nachtwacht {name}: not part of the agent's package (nachtwacht-agent); "
                "it comes with the full package (the nachtwacht wheel that bin/package builds, "
                "installed with its [control-plane] extra)",
                file=sys.stderr,
            )
            return 2
        extra = {"control": "control-plane", "agent": "agent", "release": "agent"}.get(name)
        hint = f" (install it with: pip install 'nachtwacht[{extra}]')" if extra else ""
        print(f"nachtwacht {name}: missing dependency {exc.name!r}{hint}", file=sys.stderr)
        return 2
    entry: Callable[[list[str]], int] = module.main
    try:
        return entry(rest)
    except ClockConfigError as exc:
        # Every program reads the clock setting once at start-up, wherever its shell does; a bad
        # value is the same one-line error for all of them, never a traceback.
        print(f"nachtwacht {name}: {exc}", file=sys.stderr)
        return 2


def _is_part_of(module_name: str, missing: str) -> bool:
    """Whether the missing module is the subcommand's own module or a package holding it."""
    return module_name == missing or module_name.startswith(f"{missing}.")


# The full distribution, and the agent's, which holds the same `nachtwacht` command.
DISTRIBUTIONS = ("nachtwacht", "nachtwacht-agent")


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for distribution in DISTRIBUTIONS:
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return "(not installed)"  # run from a source tree that was never installed


if __name__ == "__main__":
    sys.exit(main())
