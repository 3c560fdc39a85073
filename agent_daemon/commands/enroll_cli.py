"""`nachtwacht agent enroll`: write the agent's config, once the control plane has accepted its
credential — and the one path `install` shares (`staged_enrollment`), where the credential comes
from an enrollment token instead.

Every field is validated by the same checks as `run` before anyone is asked (a staging copy of the
file is loaded as settings; a problem is named by its flag, never by that copy), then the control
plane's first config names the agent, the config is written (mode 0600) and the answer cached, so
the daemon starts with its schedule.

The agent reaches the control plane the way the service will: the service does not see this
shell's environment, so a proxy taken from `HTTPS_PROXY` (and friends) is written into the config
rather than used silently (`network_cli.inherited_proxy`); `--proxy ''` means none.

`--trust-root FILE` gives the host the trust root it holds from then on: refused unless its own
root keys signed it (their threshold) and it has not expired, stored as `trust_root.json` in the
state directory (mode 0644), and put back as it was when the enroll fails before the config is
written. Without it the `--trusted-key` files are trusted, as before roots existed. A folder the
enroll made for the config or the state (`/etc/nachtwacht-agent`, `/var/lib/nachtwacht-agent`)
is removed again when it fails before the config is written; a folder that was there stays.

`--agent-user USER` is the managed agent's user (`agent_user`): the build's self-test and health
command run as that user. It must exist on the host when the agent is enrolled.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shlex
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from agent_daemon.commands.agent_parts import CONFIG_CACHE_NAME, http_client_for, track_of
from agent_daemon.commands.network_cli import (
    as_the_service_sees_it,
    inherited_proxy,
    network_fields,
)
from agent_daemon.connection.config_cache import CachedConfig, ConfigCache
from agent_daemon.connection.control_plane_client import ControlPlaneClient, FreshConfig
from agent_daemon.connection.http_client import network_facts
from agent_daemon.connection.proxy_route import shown_proxy
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.held_trust_root import (
    MAX_TRUST_ROOT_FILE_BYTES,
    TRUST_ROOT_FILE_NAME,
    HeldTrustRootFile,
)
from agent_daemon.errors import BadServerAnswer, ConfigError, CredentialRefused
from agent_daemon.settings import (
    AgentPaths,
    AgentSettings,
    load_settings,
    render_config,
    write_config,
)
from ground.clock import clock_from_env
from ground.planted_files import NotRegularFile, read_regular

__all__ = ["StagedEnrollment", "enroll", "read_secret", "staged_enrollment"]

ConfigFields = dict[str, str | float | bool | list[str]]

# Each config field by the flag that sets it: a problem is reported as the admin typed it.
_FLAG_OF_FIELD = {
    "control_url": "--url",
    "credential": "--credential",
    "trusted_keys": "--trusted-key",
    "install_root": "--install-root",
    "platform": "--platform",
    "channel": "--channel",
    "restart_command": "--restart-command",
    "health_command": "--health-command",
    "health_deadline_seconds": "--health-deadline-seconds",
    "request_timeout_seconds": "--request-timeout-seconds",
    "agent_user": "--agent-user",
    "proxy": "--proxy",
    "no_proxy": "--no-proxy",
    "ca_file": "--ca-file",
    "pinned_public_key_sha256": "--pinned-public-key-sha256",
    "client_cert": "--client-cert",
    "client_key": "--client-key",
    "insecure_http": "--insecure-http",
}
_FIELD_AT_START = re.compile(r"(?P<field>[a-z][a-z0-9_]*)(?:\.[0-9]+|\[[0-9]+\])?(?=:)")


def read_secret(value: str) -> str:
    """The value of a secret's flag; `-` reads it from the first line of stdin (so it stays out
    of the shell's history and the process list)."""
    return sys.stdin.readline().strip() if value == "-" else value


@dataclass(kw_only=True)
class StagedEnrollment:
    """An enrollment whose every field has been checked: the config it will write (`fields`), the
    settings they make, and the trust root held for it. `write` makes it the host's config."""

    paths: AgentPaths
    fields: ConfigFields
    settings: AgentSettings
    clock: ServerClock
    # The environment as the service will see it (no proxy variables of this shell).
    environ: Mapping[str, str]
    held: HeldTrustRootFile
    holds_root: bool
    written: bool = field(default=False)

    def write(self, *, credential: str, agent_id: str) -> AgentSettings:
        """Write the config with the agent's own credential and id; the settings it makes."""
        self.fields["credential"] = credential
        self.fields["agent_id"] = agent_id
        write_config(self.paths.config_file, render_config(self.fields))
        self.written = True
        return load_settings(self.paths)

    def first_config(self, settings: AgentSettings) -> FreshConfig:
        """The control plane's config for `settings`' credential (which it thereby accepts)."""
        with http_client_for(settings, self.clock, environ=self.environ) as http:
            answer = ControlPlaneClient(
                http=http, server_clock=self.clock, track=track_of(settings)
            ).fetch_config(etag=None)
        if not isinstance(answer, FreshConfig):
            raise BadServerAnswer("GET /v1/agent/config: 304 although no ETag was sent")
        return answer

    def cache(self, answer: FreshConfig) -> None:
        ConfigCache(self.paths.state_dir / CONFIG_CACHE_NAME).save(
            CachedConfig(
                config=answer.config,
                raw=answer.raw,
                etag=answer.etag,
                synced_at=self.clock.now(),
                offset_seconds=self.clock.offset.total_seconds(),
            )
        )

    def route(self) -> str:
        facts = network_facts(self.settings.control_url, self.settings.network, self.environ)
        return str(facts["route"])


@contextmanager
def staged_enrollment(
    args: argparse.Namespace,
    paths: AgentPaths,
    *,
    credential: str,
    environ: Mapping[str, str],
) -> Iterator[StagedEnrollment]:
    """Check every flag of `enroll` / `install` as `run` will check the file, before anyone is
    asked; `credential` may stand in for the one still to come (it is checked as one). An exit
    before `write` leaves the host as it was (the trust root put back)."""
    if paths.config_file.exists() and not args.force:
        raise ConfigError(f"{paths.config_file}: already exists (use --force to replace it)")
    if not args.trusted_key and args.trust_root is None:
        raise ConfigError(
            "--trusted-key / --trust-root: found neither — expected a trust root (--trust-root "
            "FILE) or at least one release.pub (--trusted-key PATH)"
        )
    if args.agent_user is not None:
        _check_user_exists(args.agent_user)
    clock = ServerClock(clock_from_env())
    root = None if args.trust_root is None else _checked_trust_root(Path(args.trust_root), clock)
    fields = _config_fields(args, credential)
    inherited = inherited_proxy(args, control_url=str(fields["control_url"]), environ=environ)
    if inherited is not None:
        fields["proxy"] = inherited.url
        if inherited.no_proxy:
            fields["no_proxy"] = list(inherited.no_proxy)
    staging = paths.config_file.with_name(f".{paths.config_file.name}.enroll")
    made = _missing_folders(paths.config_file.parent, paths.state_dir)
    held = HeldTrustRootFile(paths.state_dir / TRUST_ROOT_FILE_NAME)
    replaced = _held_bytes(held.path)
    staged: StagedEnrollment | None = None
    try:
        write_config(staging, render_config(fields))
        if root is not None:
            # Held before the settings are loaded: they trust its keys when no file is named.
            held.save(root)
        settings = _load_staged(AgentPaths(state_dir=paths.state_dir, config_file=staging))
        staged = StagedEnrollment(
            paths=paths,
            fields=fields,
            settings=settings,
            clock=clock,
            environ=as_the_service_sees_it(environ),
            held=held,
            holds_root=root is not None,
        )
        if inherited is not None:
            shown = shown_proxy(inherited.url)
            print(
                f"proxy {shown} taken from this shell's {inherited.source.split()[-1]} and "
                "written to the config: the service does not see this shell's environment "
                "(--proxy '' for none)"
            )
        yield staged
    finally:
        staging.unlink(missing_ok=True)
        if staged is None or not staged.written:
            if root is not None:
                _put_back(held, replaced)
            _remove_empty(made)


def enroll(
    args: argparse.Namespace, paths: AgentPaths, environ: Mapping[str, str] = os.environ
) -> int:
    credential = read_secret(args.credential)
    with staged_enrollment(args, paths, credential=credential, environ=environ) as staged:
        try:
            answer = staged.first_config(staged.settings)
        except CredentialRefused as exc:
            # The credential is the one just given: it is the thing to check, not the agent.
            raise CredentialRefused(
                f"--credential: the control plane refused the credential given ({exc.answered})"
                " — expected one it issued and has not revoked: check it, or ask your provider"
                " for a new one",
                answered=exc.answered,
            ) from exc
        staged.write(credential=credential, agent_id=str(answer.config.agent_id))
        staged.cache(answer)
    name = answer.config.name or str(answer.config.agent_id)
    print(f"enrolled agent {name} ({answer.config.agent_id}) with {staged.fields['control_url']}")
    print_written(staged)
    return 0


def print_written(staged: StagedEnrollment) -> None:
    print(f"config written to {staged.paths.config_file} (mode 0600)")
    print(f"state directory {staged.paths.state_dir}")
    if staged.holds_root:
        print(f"trust root held: {staged.held.path}")
    print(f"control plane reached {staged.route()}")


def _config_fields(args: argparse.Namespace, credential: str) -> ConfigFields:
    install_root = Path(args.install_root)
    health = args.health_command or shlex.join(
        [str(install_root / "current" / "bin" / "provibr-agent"), "health"]
    )
    fields: ConfigFields = {
        "control_url": args.url.rstrip("/"),
        "credential": credential,
        "agent_id": "pending",
        "trusted_keys": [str(Path(p).absolute()) for p in args.trusted_key],
        "install_root": str(install_root),
        "platform": args.platform,
        "channel": args.channel,
        "restart_command": shlex.split(args.restart_command),
        "health_command": shlex.split(health),
        "health_deadline_seconds": args.health_deadline_seconds,
        "request_timeout_seconds": args.request_timeout_seconds,
        **network_fields(args),
    }
    if args.agent_user is not None:
        fields["agent_user"] = args.agent_user
    return fields


def _check_user_exists(user: str) -> None:
    try:
        pwd.getpwuid(int(user)) if user.isdecimal() else pwd.getpwnam(user)
    except (KeyError, ValueError, OverflowError) as exc:
        raise ConfigError(
            f"--agent-user: {user!r} is not a user on this host — expected the user the managed "
            "agent's service runs as (its unit's User=); create it first"
        ) from exc


def _load_staged(staging: AgentPaths) -> AgentSettings:
    """The staging copy loaded as `run` loads the config, its problems named by their flags."""
    try:
        return load_settings(staging)
    except ConfigError as exc:
        prefix = f"{staging.config_file}: "
        lines = [_named_by_flag(line.removeprefix(prefix)) for line in str(exc).splitlines()]
        raise ConfigError("\n".join(lines)) from exc


def _named_by_flag(line: str) -> str:
    match = _FIELD_AT_START.match(line)
    if match is None or match["field"] not in _FLAG_OF_FIELD:
        return line
    return _FLAG_OF_FIELD[match["field"]] + line[match.end() :]


def _checked_trust_root(path: Path, clock: ServerClock) -> bytes:
    """The root file's bytes once they are a self-signed root that has not expired; a
    `ConfigError` naming the flag, the file and the reason otherwise."""
    # Imported here: only an enroll with a trust root needs `tuf`.
    from signed_release.errors import TrustRootError
    from signed_release.trust_root import MAX_ROOT_BYTES, check_not_expired, self_signed_root

    try:
        data = read_regular(path, MAX_ROOT_BYTES, follow_links=True)
    except NotRegularFile as exc:
        raise ConfigError(f"--trust-root: {path}: {exc.strerror} — expected root.json") from exc
    except OSError as exc:
        raise ConfigError(f"--trust-root: {path}: cannot be read ({exc.strerror})") from exc
    if len(data) > MAX_ROOT_BYTES:
        raise ConfigError(f"--trust-root: {path}: more than {MAX_ROOT_BYTES} bytes expected")
    try:
        root = self_signed_root(data)
        check_not_expired(root, clock.now())
    except TrustRootError as exc:
        raise ConfigError(f"--trust-root: {path}: {exc}") from exc
    return root.body


def _missing_folders(*folders: Path) -> list[Path]:
    """`folders` and their parents that do not exist yet, deepest first: the ones this run
    makes, and so the only ones it may remove again."""
    missing: set[Path] = set()
    for folder in folders:
        for path in (folder, *folder.parents):
            if path in missing or path.exists():
                break
            missing.add(path)
    return sorted(missing, key=lambda path: len(path.parts), reverse=True)


def _remove_empty(folders: list[Path]) -> None:
    """Remove each of `folders` (deepest first) that is empty; one holding anything stays."""
    for folder in folders:
        with suppress(OSError):
            folder.rmdir()


def _held_bytes(path: Path) -> bytes | None:
    """The held trust root's bytes, to put back when the enroll fails; None when none is held.
    Never through a link nor from a pipe: the daemon's user may own the state directory, and
    what is put back (mode 0644) must not be a file of root's."""
    expected = "expected the held trust root (a regular file) or none; nothing was changed"
    try:
        data = read_regular(path, MAX_TRUST_ROOT_FILE_BYTES, follow_links=False)
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:
        raise ConfigError(f"{path}: {exc.strerror} — {expected}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from exc
    if len(data) > MAX_TRUST_ROOT_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_TRUST_ROOT_FILE_BYTES} bytes — {expected}")
    return data


def _put_back(held: HeldTrustRootFile, before: bytes | None) -> None:
    """An enroll that failed leaves the trust root as it found it."""
    if before is None:
        held.path.unlink(missing_ok=True)
    else:
        held.save(before)
