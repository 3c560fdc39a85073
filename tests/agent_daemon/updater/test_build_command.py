"""The build's own code runs bounded (time, output), decoded leniently, and as the managed agent's
user when one is configured."""

from __future__ import annotations

import os
import pwd
import select
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_daemon.errors import ConfigError, SelfTestFailed
from agent_daemon.updater.build_command import OUTPUT_LIMIT_BYTES, CommandFailed, run_bounded
from agent_daemon.updater.install import self_test
from agent_daemon.updater.updater_settings import UpdaterSettings

NOBODY = pwd.getpwnam("nobody")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def test_output_beyond_the_limit_is_dropped_not_held() -> None:
    result = run_bounded(["sh", "-c", "head -c 5000000 /dev/zero"], timeout=10)
    assert result.returncode == 0
    assert len(result.stdout) == OUTPUT_LIMIT_BYTES


def test_undecodable_output_is_text_with_replacement_characters() -> None:
    result = run_bounded(["printf", "\\377ok\\376"], timeout=10)
    assert result.stdout == "\ufffdok\ufffd"


def _wait_for_end(pid: int, *, timeout: float) -> bool:
    """Whether `pid` ended within `timeout` seconds. A process's pidfd becomes readable when it
    ends — a zombie waiting for a reaper counts (in a container nothing may reap an orphan)."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([handle], [], [], timeout)
        return bool(readable)
    finally:
        os.close(handle)


def test_a_child_that_keeps_the_output_open_is_killed_with_its_group(tmp_path: Path) -> None:
    # The proof is the background child's end, not how long the call took (a loaded machine
    # stretches any bound on that): left alive, it would hold the output open for ten minutes.
    pid_file = tmp_path / "background.pid"
    script = f'sleep 600 & echo $! > "{pid_file}"; echo started'
    with pytest.raises(CommandFailed, match=r"did not finish within 1 s"):
        run_bounded(["sh", "-c", script], timeout=1)
    background = int(pid_file.read_text())
    # 30 s: a deadline for a failure, not a speed expectation.
    ended = _wait_for_end(background, timeout=30)
    if not ended:
        os.kill(background, signal.SIGKILL)
    assert ended, f"the group's child {background} still runs"


def test_a_command_that_cannot_run_is_a_command_failure() -> None:
    with pytest.raises(CommandFailed, match="cannot run"):
        run_bounded(["/nonexistent/agent", "--version"], timeout=1)


def _program(folder: Path) -> Path:
    program = folder / "provibr-agent"
    program.write_text("#!/bin/sh\necho 1.4.2\n")
    program.chmod(0o755)
    return program


def test_a_program_still_open_for_writing_a_moment_is_started_once_it_is_closed(
    tmp_path: Path,
) -> None:
    """A build just unpacked is busy (ETXTBSY) while any process holds it open for writing: a
    child forked by another thread holds it until its own exec."""
    program = _program(tmp_path)
    writer = program.open("ab")
    closing = threading.Timer(0.2, writer.close)
    closing.start()
    try:
        result = run_bounded([str(program)], timeout=10)
    finally:
        closing.join()
        writer.close()
    assert (result.returncode, result.stdout) == (0, "1.4.2\n")


def test_a_program_kept_open_for_writing_is_a_command_failure_that_says_so(
    tmp_path: Path,
) -> None:
    program = _program(tmp_path)
    with program.open("ab"), pytest.raises(CommandFailed, match=r"cannot run: .*Text file busy"):
        run_bounded([str(program)], timeout=10)


def test_an_unknown_user_is_a_command_failure() -> None:
    with pytest.raises(CommandFailed, match="agent_user: 'no-such-user-here' is not a user"):
        run_bounded(["true"], timeout=1, user="no-such-user-here")


@as_root
def test_the_build_runs_as_the_agents_user_without_roots_groups() -> None:
    result = run_bounded(["id"], timeout=10, user="nobody")
    assert f"uid={NOBODY.pw_uid}(" in result.stdout
    assert "groups=" in result.stdout
    assert "(root)" not in result.stdout


@pytest.fixture
def traversable_build() -> Iterator[Path]:
    """A build folder the agent's user can reach (pytest's own tmp_path is root-only)."""
    folder = Path(tempfile.mkdtemp(prefix="nachtwacht-build-"))
    try:
        folder.chmod(0o755)
        (folder / "bin").mkdir(mode=0o755)
        entry = folder / "bin/provibr-agent"
        entry.write_text("#!/bin/sh\nid -u\n")
        entry.chmod(0o755)
        yield folder
    finally:
        for path in sorted(folder.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        folder.rmdir()


@as_root
def test_the_self_test_runs_as_the_agents_user(traversable_build: Path) -> None:
    # This build prints the uid it runs as; it passes only when that is nobody's.
    self_test(traversable_build, str(NOBODY.pw_uid), user="nobody")
    with pytest.raises(SelfTestFailed, match=f"printed '{NOBODY.pw_uid}'"):
        self_test(traversable_build, "0", user="nobody")


@pytest.mark.parametrize(
    "user",
    [pytest.param("root; rm -rf /", id="shell_text"), pytest.param("Ab", id="upper_case"),
     pytest.param("", id="empty")],
)  # fmt: skip
def test_an_agent_user_setting_that_is_not_a_user_name_is_refused(
    tmp_path: Path, user: str
) -> None:
    with pytest.raises(ConfigError, match="agent_user"):
        UpdaterSettings(
            install_root=tmp_path,
            state_dir=tmp_path,
            trusted_keys={"k": Ed25519PrivateKey.generate().public_key()},
            platform="linux-x86_64",
            channel="stable",
            health_command=("true",),
            agent_user=user,
        )
