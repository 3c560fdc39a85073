"""`nachtwacht release …`: the release-format package's commands (`signed_release.cli`) plus
`build-demo-agent`, which builds the tiny real agent of the demo and the tests. The demo agent
lives in the roof (`nachtwacht.demo_world.demo_agent`): an agent host verifying releases needs none
of it, and the agent's package (nachtwacht-agent) ships without it, so there the command is
simply not offered.

    nachtwacht release build-demo-agent --version 1.5.0 [--fault F] [--padding-bytes N] --out FILE
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import cast

from ground.whole_numbers import whole_number
from signed_release.cli import ExtraCommand, version_argument
from signed_release.cli import main as release_main

__all__ = ["main"]


def _byte_count(value: str) -> int:
    number = whole_number(value)
    if number is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of bytes")
    return number


def _arguments(parser: argparse.ArgumentParser) -> None:
    from nachtwacht.demo_world.demo_agent import FAULTS

    parser.add_argument("--version", type=version_argument, required=True)
    parser.add_argument("--fault", choices=FAULTS, default="none", help="build a broken agent")
    parser.add_argument(
        "--padding-bytes", type=_byte_count, default=0, help="incompressible filler"
    )
    parser.add_argument("--out", type=Path, required=True, metavar="FILE.tar.gz")


def _build(args: argparse.Namespace) -> int:
    from nachtwacht.demo_world.demo_agent import Fault, build_demo_agent

    fault = cast(Fault, args.fault)
    out = build_demo_agent(
        args.out, version=args.version, fault=fault, padding_bytes=args.padding_bytes
    )
    print(f"wrote {out} (provibr-agent {args.version}, fault {args.fault})")
    return 0


BUILD_DEMO_AGENT = ExtraCommand(
    name="build-demo-agent",
    help="build a tiny real agent (tar.gz)",
    add_arguments=_arguments,
    run=_build,
)


def _demo_installed() -> bool:
    return importlib.util.find_spec("nachtwacht.demo_world") is not None


def main(argv: list[str]) -> int:
    extra = (BUILD_DEMO_AGENT,) if _demo_installed() else ()
    return release_main(argv, extra_commands=extra)
