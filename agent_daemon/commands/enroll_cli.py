"""`nachtwacht agent enroll`: write the agent's config, once the control plane has accepted its
credential.

Every field is validated by the same checks as `run` before anyone is asked (a staging copy of the
file is loaded as settings), then the control plane's first config names the agent, the config is
written (mode 0600) and the answer cached, so the daemon starts with its schedule.

`--trust-root FILE` gives the host the trust root it holds from then on: refused unless its own
root keys signed it (their threshold) and it has not expired, stored as `trust_root.json` in the
state directory (mode 0644), and put back as it was when the enroll fails. Without it the
`--trusted-key` files are trusted, as before roots existed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from agent_daemon.commands.agent_parts import CONFIG_CACHE_NAME, http_client_for, track_of
from agent_daemon.commands.network_cli import network_fields
from agent_daemon.connection.config_cache import CachedConfig, ConfigCache
from agent_daemon.connection.control_plane_client import ControlPlaneClient, FreshConfig
from agent_daemon.connection.http_client import network_facts
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.held_trust_root import TRUST_ROOT_FILE_NAME, HeldTrustRootFile
from agent_daemon.errors import BadServerAnswer, ConfigError
from agent_daemon.settings import AgentPaths, load_settings, render_config, write_config
from ground.clock import clock_from_env

__all__ = ["enroll"]


def enroll(args: argparse.Namespace, paths: AgentPaths) -> int:
    if paths.config_file.exists() and not args.force:
        raise ConfigError(f"{paths.config_file}: already exists (use --force to replace it)")
    if not args.trusted_key and args.trust_root is None:
        raise ConfigError(
            "--trusted-key / --trust-root: found neither — expected a trust root (--trust-root "
            "FILE) or at least one release.pub (--trusted-key PATH)"
        )
    clock = ServerClock(clock_from_env())
    root = None if args.trust_root is None else _checked_trust_root(Path(args.trust_root), clock)
    credential = sys.stdin.readline().strip() if args.credential == "-" else args.credential
    install_root = Path(args.install_root)
    health = args.health_command or shlex.join(
        [str(install_root / "current" / "bin" / "provibr-agent"), "health"]
    )
    fields: dict[str, str | float | bool | list[str]] = {
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
    # Validate everything the file will hold before talking to anyone: the same checks as `run`.
    staging = paths.config_file.with_name(f".{paths.config_file.name}.enroll")
    write_config(staging, render_config(fields))
    held = HeldTrustRootFile(paths.state_dir / TRUST_ROOT_FILE_NAME)
    replaced = _held_bytes(held.path)
    enrolled = False
    try:
        if root is not None:
            # Held before the settings are loaded: they trust its keys when no file is named.
            held.save(root)
        settings = load_settings(AgentPaths(state_dir=paths.state_dir, config_file=staging))
        with http_client_for(settings, clock) as http:
            answer = ControlPlaneClient(
                http=http, server_clock=clock, track=track_of(settings)
            ).fetch_config(etag=None)
        if not isinstance(answer, FreshConfig):
            raise BadServerAnswer("GET /v1/agent/config: 304 although no ETag was sent")
        fields["agent_id"] = str(answer.config.agent_id)
        write_config(paths.config_file, render_config(fields))
        ConfigCache(paths.state_dir / CONFIG_CACHE_NAME).save(
            CachedConfig(
                config=answer.config,
                raw=answer.raw,
                etag=answer.etag,
                synced_at=clock.now(),
                offset_seconds=clock.offset.total_seconds(),
            )
        )
        enrolled = True
    finally:
        staging.unlink(missing_ok=True)
        if root is not None and not enrolled:
            _put_back(held, replaced)
    name = answer.config.name or str(answer.config.agent_id)
    print(f"enrolled agent {name} ({answer.config.agent_id}) with {fields['control_url']}")
    print(f"config written to {paths.config_file} (mode 0600)")
    print(f"state directory {paths.state_dir}")
    if root is not None:
        print(f"trust root held: {held.path}")
    route = network_facts(settings.control_url, settings.network, os.environ)["route"]
    print(f"control plane reached {route}")
    return 0


def _checked_trust_root(path: Path, clock: ServerClock) -> bytes:
    """The root file's bytes once they are a self-signed root that has not expired; a
    `ConfigError` naming the flag, the file and the reason otherwise."""
    # Imported here: only an enroll with a trust root needs `tuf`.
    from signed_release.errors import TrustRootError
    from signed_release.trust_root import MAX_ROOT_BYTES, check_not_expired, self_signed_root

    try:
        size = path.stat().st_size
        if size > MAX_ROOT_BYTES:
            raise ConfigError(
                f"--trust-root: {path}: {size} bytes, at most {MAX_ROOT_BYTES} expected"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--trust-root: {path}: cannot be read ({exc.strerror})") from exc
    try:
        root = self_signed_root(data)
        check_not_expired(root, clock.now())
    except TrustRootError as exc:
        raise ConfigError(f"--trust-root: {path}: {exc}") from exc
    return root.body


def _held_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _put_back(held: HeldTrustRootFile, before: bytes | None) -> None:
    """An enroll that failed leaves the trust root as it found it."""
    if before is None:
        held.path.unlink(missing_ok=True)
    else:
        held.save(before)
