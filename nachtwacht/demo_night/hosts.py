"""The demo's real hosts: one per agent, each a world-kit host (`nachtwacht.demo_world.hosts`) in
`hosts/<name>/` with its account in the control plane and its `nachtwacht agent run` daemon,
whose event lines go to `hosts/<name>/daemon.log`.

The managed agent services run under the kit's `ServiceSupervisor` (the demo's stand-in for
systemd), and their health command is the kit's bash probe (`HEALTH_SCRIPT`): on a fast clock the
updater probes many times a real second.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from nachtwacht.demo_night.platform import AgentAccount
from nachtwacht.demo_world.children import stop_process
from nachtwacht.demo_world.hosts import AgentHost

__all__ = ["RealHost"]


@dataclass
class RealHost:
    account: AgentAccount
    org_name: str
    host: AgentHost
    daemon: subprocess.Popen[bytes] | None = None

    def write_agent_config(self, *, control_url: str, speed: float) -> None:
        self.host.write_agent_config(
            control_url=control_url,
            credential=self.account.agent_key,
            agent_id=self.account.agent_id,
            speed=speed,
        )

    def start_daemon(self, clock_setting: str) -> None:
        self.daemon = self.host.start_logged(clock_setting)

    def stop_daemon(self) -> None:
        stop_process(self.daemon)
