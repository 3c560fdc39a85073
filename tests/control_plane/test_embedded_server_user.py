"""Run as root, the embedded PostgreSQL runs under an account of its own. That account is a system
account nobody can log in as — never a login account with a shell, made without a word."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from control_plane.database import (
    NO_LOGIN_SHELLS,
    ensure_server_user,
    login_shell_warning,
    make_server_user,
    server_user_command,
)
from control_plane.errors import DatabaseUnavailable


def test_the_account_is_made_as_a_system_account_without_a_login() -> None:
    command = server_user_command("pgserver", "/usr/sbin/nologin")
    assert command[0] == "useradd"
    assert command[-1] == "pgserver"
    assert "--system" in command
    assert command[command.index("--shell") + 1] == "/usr/sbin/nologin"
    assert "--no-create-home" in command
    assert "/bin/bash" not in command


@pytest.mark.parametrize(
    ("shell", "warned"),
    [
        pytest.param("/bin/bash", True, id="bash_as_pgserver_made_it"),
        pytest.param("", True, id="empty_is_bin_sh"),
        pytest.param("/bin/sh", True, id="sh"),
        *(pytest.param(shell, False, id=shell.replace("/", "_")) for shell in NO_LOGIN_SHELLS),
    ],
)
def test_an_existing_account_with_a_login_shell_is_named_with_its_fix(
    shell: str, warned: bool
) -> None:
    warning = login_shell_warning("pgserver", shell)
    assert (warning is not None) is warned
    if warning is not None:
        assert "usermod --shell /usr/sbin/nologin pgserver" in warning


def _sys_uid_max() -> int:
    try:
        for line in Path("/etc/login.defs").read_text().splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[0] == "SYS_UID_MAX":
                return int(fields[1])
    except OSError:
        pass
    return 999


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="the embedded server runs as an account of its own only when started by root",
)
def test_as_root_the_account_made_is_a_system_account_nobody_logs_in_as() -> None:
    """A throw-away name stands for pgserver's. Before, pgserver made it with `useradd -s
    /bin/bash`: uid 1001, a login shell."""
    name = f"nwtest{secrets.token_hex(4)}"
    try:
        ensure_server_user(name)
        made = pwd.getpwnam(name)
        assert made.pw_shell in NO_LOGIN_SHELLS
        assert made.pw_uid <= _sys_uid_max()
        assert not Path(made.pw_dir).exists() or made.pw_dir == "/nonexistent"
        ensure_server_user(name)  # found the second time: nothing made again
        assert pwd.getpwnam(name).pw_uid == made.pw_uid
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


def test_an_account_that_cannot_be_made_is_one_line_saying_how_to_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `useradd` that fails (here a stand-in on PATH, so nothing on this machine changes)."""
    useradd = tmp_path / "useradd"
    useradd.write_text("#!/bin/sh\necho 'useradd: cannot lock /etc/passwd' >&2\nexit 1\n")
    useradd.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DatabaseUnavailable) as failed:
        make_server_user("pgserver")
    message = str(failed.value)
    assert "useradd: cannot lock /etc/passwd" in message
    assert "`useradd --system --shell" in message
    assert "--database-url" in message
    assert "\n" not in message


def test_no_useradd_at_all_is_the_same_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no useradd
    with pytest.raises(DatabaseUnavailable, match="could not be made"):
        make_server_user("pgserver")
