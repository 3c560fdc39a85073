"""A piece of the agent run in a child of its own, under a limit the test process must not take
on itself: a disk that is full (`full_disk`, inside the child), a network and mount namespace
of the test's own (`run_script(..., inside=NEW_NAMESPACES)`), or a bound on its memory
(`at_most_memory`, for `subprocess`'s `preexec_fn`).

The child is a Python interpreter started in the checkout (so it imports `agent_daemon` and the
tests' kit as the tests do); it prints what the test asserts as one JSON object on its last line
of output. A child that fails is the test's failure, with the child's own error output.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["NEW_NAMESPACES", "at_most_memory", "full_disk", "needs_new_namespaces", "run_script"]

_CHECKOUT = Path(__file__).parents[2]

# A network and a mount namespace, as an unprivileged user's root within them: loopback only,
# and mounts (a `resolv.conf` of the test's) no other process sees.
NEW_NAMESPACES = ("unshare", "-rnm")


def run_script(
    script: str, *args: str, inside: Sequence[str] = (), timeout: float = 120
) -> dict[str, Any]:
    """Run `script` (Python source) with `args` as its `sys.argv[1:]`, in `inside` (a command
    prefix such as `NEW_NAMESPACES`, or nothing); the JSON object its last line printed."""
    done = subprocess.run(
        [*inside, sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=_CHECKOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def needs_new_namespaces() -> None:
    """Skip the test where `NEW_NAMESPACES` cannot be made (no `unshare` or `ip`, or no user
    namespaces)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip to make a network namespace")
    probe = subprocess.run(
        [*NEW_NAMESPACES, "true"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"no user namespaces here: {probe.stderr.strip()}")


def at_most_memory(size: int) -> Callable[[], None]:
    """For `preexec_fn`: the child's address space is bounded at `size` bytes (`RLIMIT_AS`), so
    a file read whole into memory fails in the child (`MemoryError`) instead of taking the
    machine's memory."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    return limit


@contextmanager
def full_disk() -> Iterator[None]:
    """In the child: every file write past 0 bytes fails while inside, as on a full disk
    (`RLIMIT_FSIZE`, which Python answers with `EFBIG`, "File too large", rather than a
    signal); the limit the child had before is put back after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
