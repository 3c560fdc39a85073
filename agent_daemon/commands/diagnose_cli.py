"""`nachtwacht agent diagnose [--out FILE]`: one `.tar.gz` with what support asks a customer for.

    versions.txt        nachtwacht, Python, the OS
    config.toml         the config with its secrets redacted (or why it could not be read)
    status.json         `nachtwacht agent status --json` (or the error it gave)
    journal.txt         the last lines of both units' journal, or that there is no journalctl
    state/…             the daemon's and the updater's state files, the outbox's reports and the
                        held trust root (public keys only)
    connectivity.txt    a config poll through the configured proxy and trust, as the service
                        makes it (this shell's proxy variables ignored): its answer, or the
                        exact error line

Secrets never go in: the credential is replaced, a proxy's password is shown as `***`, a client
key is named by its path only, and an artifact URL loses its query (a mirror's signed URL may carry
a token). Every member is scrubbed once more before it is written, of the credential and the proxy
password and of anything with the exact shape of a secret (a key or token the control plane
issues, a URL's password, a private key), so a secret that reached a log line, an error message or
a stray file is not shipped either, while a path or a version that only starts like a key is kept
for the engineer who reads it. A state file that is a link, a pipe or a device is named, never
read. The archive is created mode 0600, never over an existing file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from agent_daemon.commands.agent_parts import http_client_for, track_of
from agent_daemon.commands.network_cli import as_the_service_sees_it
from agent_daemon.commands.unit_files import DAEMON_UNIT, MANAGED_AGENT_UNIT
from agent_daemon.connection.control_plane_client import ControlPlaneClient, FreshConfig
from agent_daemon.connection.http_client import network_facts
from agent_daemon.connection.proxy_route import shown_proxy
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import AgentError, ConfigError
from agent_daemon.settings import AgentPaths, load_settings
from ground.clock import ClockConfigError, clock_from_env
from ground.planted_files import NotRegularFile, read_regular
from signed_release.errors import ReleaseError

__all__ = ["JOURNAL_LINES", "diagnose"]

JOURNAL_LINES = 500
REDACTED = "<redacted>"
_JOURNAL_TIMEOUT_SECONDS = 60.0
# State files larger than this are named, not copied: an archive for support stays small.
_MAX_STATE_FILE_BYTES = 4 * 1024 * 1024
_DISTRIBUTIONS = ("nachtwacht", "nachtwacht-agent")
# The secrets the control plane issues, by their exact shape: a prefix naming what it is — an
# agent credential (`nwa_`), an enrollment token (`nwe_`), a panel or an operator key (`nwp_`,
# `nwo_`), a webhook secret it generated (`nwh_`) — and `secrets.token_urlsafe(32)`: 43 characters
# of base64url, as a whole word. A path or a version that merely starts so is kept.
_TOKEN_CHARACTER = rb"A-Za-z0-9_-"
_ISSUED_SECRET = re.compile(
    rb"(?<![" + _TOKEN_CHARACTER + rb"])nw[aepoh]_[" + _TOKEN_CHARACTER + rb"]{43}"
    rb"(?![" + _TOKEN_CHARACTER + rb"])"
)
_PRIVATE_KEY = re.compile(
    rb"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL
)
# A URL's password: `scheme://user:password@` keeps the user, the password becomes `***`.
_URL_PASSWORD = re.compile(rb"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:\"']*:)[^\s/@\"']+@")


def diagnose(paths: AgentPaths, *, out: str | None) -> int:
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    archive = Path(out or f"nachtwacht-diagnose-{stamp}.tar.gz").absolute()
    config, secrets = _redacted_config(paths)
    members: dict[str, bytes] = {
        "versions.txt": _versions().encode(),
        "config.toml": config.encode(),
        "status.json": _status(paths).encode(),
        "journal.txt": _journal().encode(),
        "connectivity.txt": _connectivity(paths).encode(),
    }
    for name, data in _state_files(paths.state_dir):
        members[f"state/{name}"] = data
    try:
        descriptor = os.open(archive, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise ConfigError(f"--out: {archive} already exists — expected a new file") from exc
    folder = f"nachtwacht-diagnose-{stamp}"
    with os.fdopen(descriptor, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in members.items():
            scrubbed = _scrubbed(data, secrets)
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(scrubbed)
            info.mtime = int(started.timestamp())
            info.mode = 0o600
            tar.addfile(info, io.BytesIO(scrubbed))
    print(archive)
    return 0


def _versions() -> str:
    lines = []
    for name in _DISTRIBUTIONS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            lines.append(f"{name} {metadata.version(name)}")
    lines.append(f"python {platform.python_version()} ({sys.executable})")
    lines.append(f"os {platform.platform()}")
    with contextlib.suppress(OSError):
        release = Path("/etc/os-release").read_text(encoding="utf-8", errors="replace")
        lines += ["", "/etc/os-release:", release.strip()]
    return "\n".join(lines) + "\n"


def _redacted_config(paths: AgentPaths) -> tuple[str, list[str]]:
    """The config as TOML with its secrets replaced, and the secrets (to scrub everything else
    of). Read leniently: a config `run` refuses is exactly what support needs to see."""
    try:
        document = tomllib.loads(
            _read_regular_file(paths.config_file, follow_links=True).decode("utf-8")
        )
    except NotRegularFile:
        return f"# {paths.config_file}: not a regular file; not read\n", []
    except _TooLarge as exc:
        return f"# {paths.config_file}: {exc} bytes: too large to include\n", []
    except OSError as exc:
        return f"# {paths.config_file}: cannot be read ({exc.strerror})\n", []
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        # Its text is not included: the credential is in it.
        return f"# {paths.config_file}: not valid TOML ({exc}); not included\n", []
    secrets: list[str] = []
    credential = document.get("credential")
    if isinstance(credential, str) and credential:
        secrets.append(credential)
        document["credential"] = REDACTED
    proxy = document.get("proxy")
    if isinstance(proxy, str):
        password = urlsplit(proxy).password
        if password:
            secrets += [password, unquote(password)]
        document["proxy"] = shown_proxy(proxy)
    # Imported here: only `enroll` and `diagnose` write TOML.
    import tomli_w

    header = f"# {paths.config_file}, secrets redacted (the client key is named, never read)\n"
    return header + tomli_w.dumps(document), secrets


def _status(paths: AgentPaths) -> str:
    # Imported here: `status` is its own verb; the daemon never holds it.
    from agent_daemon.commands.status_cli import show_status

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            show_status(paths, as_json=True)
    except (AgentError, ReleaseError, ClockConfigError, OSError) as exc:
        return json.dumps({"status_error": str(exc)}, indent=2) + "\n"
    return printed.getvalue()


def _journal() -> str:
    journalctl = shutil.which("journalctl")
    if journalctl is None:
        return "journalctl: not found on this host; no journal lines included\n"
    command = [
        journalctl, "--no-pager", "--output=short-iso-precise", f"--lines={JOURNAL_LINES}",
        f"--unit={DAEMON_UNIT}", f"--unit={MANAGED_AGENT_UNIT}",
    ]  # fmt: skip
    try:
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_JOURNAL_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{' '.join(command)}: {exc}\n"
    said = result.stdout
    if result.returncode != 0:
        said += f"\n{' '.join(command)}: exit status {result.returncode}: {result.stderr.strip()}\n"
    return said


def _connectivity(paths: AgentPaths) -> str:
    """One config poll as the daemon makes it: its result, or the exact error line."""
    try:
        settings = load_settings(paths)
    except AgentError as exc:
        return f"not tried: the config cannot be used ({exc})\n"
    # As the service reaches it: this shell's proxy variables are not the service's.
    environ = as_the_service_sees_it(os.environ)
    facts = network_facts(settings.control_url, settings.network, environ)
    lines = [
        f"control plane: {settings.control_url}",
        f"route: {facts['route']}",
        f"trust: {facts['trust']}",
    ]
    started = time.monotonic()
    try:
        clock = ServerClock(clock_from_env())
        with http_client_for(settings, clock, environ=environ) as http:
            answer = ControlPlaneClient(
                http=http, server_clock=clock, track=track_of(settings)
            ).fetch_config(etag=None)
    except (AgentError, ReleaseError, ClockConfigError) as exc:
        lines.append(f"config poll: failed: {exc}")
    else:
        took = time.monotonic() - started
        agent = answer.config.name if isinstance(answer, FreshConfig) else "unchanged"
        lines.append(f"config poll: answered in {took:.2f} s (agent {agent})")
        offset = round(clock.offset.total_seconds(), 1) + 0.0  # + 0.0: never "-0.0"
        lines.append(f"clock offset: {offset:+.1f} s (the control plane's clock minus this host's)")
    return "\n".join(lines) + "\n"


def _state_files(state_dir: Path) -> Iterator[tuple[str, bytes]]:
    """The state directory's JSON files (the outbox's reports included), artifact URLs without
    their query; the config itself is never among them (it is included redacted).

    The daemon's user may own this directory, and root runs `diagnose`: a symbolic link, a named
    pipe or a device is named, never followed or read, and no linked folder is walked into."""
    if not state_dir.is_dir():
        return
    for folder, folders, files in sorted(os.walk(state_dir)):
        here = Path(folder)
        for name in sorted(folders):
            if (here / name).is_symlink():
                relative = (here / name).relative_to(state_dir).as_posix()
                yield f"{relative}.skipped.txt", b"a symbolic link; not followed\n"
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            relative = (here / name).relative_to(state_dir).as_posix()
            try:
                data = _read_regular_file(here / name, follow_links=False)
            except NotRegularFile:
                yield f"{relative}.skipped.txt", b"not a regular file; not read\n"
            except _TooLarge as exc:
                yield f"{relative}.skipped.txt", f"{exc} bytes: too large to include\n".encode()
            except OSError as exc:
                yield f"{relative}.error.txt", f"cannot be read ({exc.strerror})\n".encode()
            else:
                yield relative, _without_url_queries(data)


class _TooLarge(Exception):
    pass


def _read_regular_file(path: Path, *, follow_links: bool) -> bytes:
    """The bytes of a regular file of at most `_MAX_STATE_FILE_BYTES` (`planted_files`)."""
    data = read_regular(path, _MAX_STATE_FILE_BYTES, follow_links=follow_links)
    if len(data) > _MAX_STATE_FILE_BYTES:
        raise _TooLarge(f"more than {_MAX_STATE_FILE_BYTES}")
    return data


def _without_url_queries(data: bytes) -> bytes:
    try:
        document = json.loads(data)
    except ValueError:
        return data
    return json.dumps(_walk(document), indent=2).encode() + b"\n"


def _walk(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: _url_without_query(item) if key.endswith("_url") else _walk(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_walk(item) for item in value]
    return value


def _url_without_query(value: Any) -> Any:
    if not isinstance(value, str) or "?" not in value:
        return value
    return urlunsplit(urlsplit(value)._replace(query=REDACTED))


def _scrubbed(data: bytes, secrets: list[str]) -> bytes:
    """`data` without the config's secrets, nor anything shaped like a secret wherever it sits (an
    older credential in a copy of the config, an enrollment token or a proxy's password in a
    line a state file kept, a private key pasted somewhere)."""
    for secret in secrets:
        data = data.replace(secret.encode(), REDACTED.encode())
    data = _ISSUED_SECRET.sub(REDACTED.encode(), data)
    data = _PRIVATE_KEY.sub(REDACTED.encode(), data)
    return _URL_PASSWORD.sub(rb"\1***@", data)
