"""`nachtwacht demo`: one command that shows the whole product on a fresh machine.

It starts the control plane on an embedded PostgreSQL in a temporary folder, makes a release key,
builds and signs two versions of the demo agent, enrolls a fleet (by default three organisations
of 40, 8 and 1 agents, each a real `nachtwacht agent run` process with its own state directory,
install root and managed agent service), installs the first version everywhere, publishes the
second, and plays one night from 02:50 to 03:30 platform time on a fast clock shared by every
process. Then it prints what happened and removes everything (unless `--keep`).
The parts live in `nachtwacht/demo_night/`.
"""

from __future__ import annotations

import sys

from ground.clock import SystemClock
from nachtwacht.demo_night.errors import DemoError, DemoUsageError
from nachtwacht.demo_night.options import parse_options
from nachtwacht.demo_world.errors import WorldError

__all__ = ["main"]


def main(argv: list[str]) -> int:
    if any(arg in {"-h", "--help"} for arg in argv):
        from nachtwacht.demo_night.options import build_parser

        build_parser().print_help()
        return 0
    try:
        options = parse_options(argv, now=SystemClock().now())
        from nachtwacht.demo_night.run import run_demo  # the control plane's imports, when needed

        return run_demo(options)
    except DemoUsageError as exc:
        print(f"nachtwacht demo: {exc}", file=sys.stderr)
        return 2
    except (DemoError, WorldError) as exc:
        print(f"nachtwacht demo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("nachtwacht demo: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # A person runs this: one line, never a stack trace. Everything the demo started has been
        # stopped by then (run_demo unwinds its ExitStack on the way out).
        print(
            f"nachtwacht demo: stopped by an unexpected {type(exc).__name__}: {exc} "
            "(run with --keep to inspect the logs it leaves)",
            file=sys.stderr,
        )
        return 1
