"""`nachtwacht agent enroll`: write the agent's config, once the control plane has accepted its
credential.

Every field is validated by the same checks as `run` before anyone is asked (a staging copy of the
file is loaded as settings), then the control plane's first config names the agent, the config is
written (mode 0600) and the answer cached, so the daemon starts with its schedule.
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
from agent_daemon.errors import BadServerAnswer, ConfigError
from agent_daemon.settings import AgentPaths, load_settings, render_config, write_config
from ground.clock import clock_from_env

__all__ = ["enroll"]


def enroll(args: argparse.Namespace, paths: AgentPaths) -> int:
    if paths.config_file.exists() and not args.force:
        raise ConfigError(f"{paths.config_file}: already exists (use --force to replace it)")
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
    try:
        settings = load_settings(AgentPaths(state_dir=paths.state_dir, config_file=staging))
        clock = ServerClock(clock_from_env())
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
    finally:
        staging.unlink(missing_ok=True)
    name = answer.config.name or str(answer.config.agent_id)
    print(f"enrolled agent {name} ({answer.config.agent_id}) with {fields['control_url']}")
    print(f"config written to {paths.config_file} (mode 0600)")
    print(f"state directory {paths.state_dir}")
    route = network_facts(settings.control_url, settings.network, os.environ)["route"]
    print(f"control plane reached {route}")
    return 0
