"""Invitation links and the way back from an OpenID Connect provider are secrets: neither the
shipped nginx site's access log nor the control plane's own (`--log-level info`) writes them.
Real nginx with the shipped site in front of two real replicas."""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from control_plane.secret_links import logged_path
from tests.conftest import RunningControlPlane
from tests.panel.conftest import PanelWorld, sign_in_client
from tests.panel.people_support import invite
from tests.worlds.balancer import nginx_balancer
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

CODE = "code-Zq81secretXy"
STATE = "state-Hw55secretKp"
# A reset link's token (unknown here: the page says so, and the log must not hold it either).
RESET = "reset-Tq42secretVb"


def test_secret_links_are_not_written_to_any_access_log(
    tmp_path: Path, control_plane_server: Callable[..., RunningControlPlane]
) -> None:
    replicas = [control_plane_server(args=["--log-level", "info"]) for _ in range(2)]
    org = replicas[0].create_org("Acme")
    world = PanelWorld(
        server=replicas[0],
        org_id=org["org_id"],
        panel_key=org["panel_key"],
        agent_id="",
        agent_key="",
    )
    with sign_in_client(world, world.panel_key) as editor:
        link = invite(editor, "Anna de Vries", "anna@example.com", "viewer")
    token = link.rsplit("/", 1)[1]
    with nginx_balancer(tmp_path / "nginx", [r.base_url for r in replicas]) as balancer:
        with httpx.Client(
            base_url=balancer.url,
            verify=ssl.create_default_context(cafile=str(balancer.ca_file)),
            timeout=60,
        ) as browser:
            # Twice each: nginx's round robin spreads them over the two replicas.
            for _ in range(2):
                assert browser.get(f"/panel/invitation/{token}").status_code == 200
                refused = browser.post(f"/panel/invitation/{token}", data={"csrf": "x"})
                assert refused.status_code in {200, 422}
                back = browser.get(f"/panel/oidc/callback?state={STATE}&code={CODE}")
                assert back.status_code == 401
                assert browser.get(f"/panel/reset/{RESET}").status_code == 410
        wait_until(lambda: len(balancer.access()) >= 8, what="nginx's access log lines")
        access = "\n".join(balancer.access())
    for secret in (token, CODE, STATE, RESET):
        assert secret not in access
    # The requests are still there to read, their secret part replaced.
    assert access.count('"GET /panel/invitation/(token) HTTP/1.1" 200') == 2
    assert access.count('"POST /panel/invitation/(token) HTTP/1.1"') == 2
    assert access.count('"GET /panel/oidc/callback?(query) HTTP/1.1" 401') == 2
    assert access.count('"GET /panel/reset/(token) HTTP/1.1" 410') == 2
    # uvicorn writes its access log to standard output, the pipe the ready line came on; nginx's
    # round robin spread the requests over both replicas.
    wanted = ("/panel/invitation/(token)", "/panel/oidc/callback?(query)", "/panel/reset/(token)")
    own = wait_until(
        lambda: _both_logs_with(replicas, wanted),
        what="the replicas' access log lines for each secret link",
    )
    for secret in (token, CODE, STATE, RESET):
        assert secret not in own


def _both_logs_with(replicas: list[RunningControlPlane], wanted: tuple[str, ...]) -> str | None:
    text = "".join(_access_log(replica) for replica in replicas)
    return text if all(line in text for line in wanted) else None


_read: dict[int, bytearray] = {}


def _access_log(replica: RunningControlPlane) -> str:
    """What the replica wrote to its standard output so far."""
    stdout = replica.process.stdout
    assert stdout is not None
    fd = stdout.fileno()
    os.set_blocking(fd, False)
    seen = _read.setdefault(fd, bytearray())
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            seen.extend(chunk)
    return seen.decode(errors="replace")


@pytest.mark.parametrize(
    ("path", "logged"),
    [
        ("/panel/invitation/abcDEF-123_x", "/panel/invitation/(token)"),
        ("/panel/invitation/abc?next=1", "/panel/invitation/(token)?next=1"),
        ("/panel/reset/abc", "/panel/reset/(token)"),
        ("/panel/oidc/callback?code=c&state=s", "/panel/oidc/callback?(query)"),
        ("/panel/oidc/callback", "/panel/oidc/callback"),
        ("/panel/people?removed=1", "/panel/people?removed=1"),
        ("/v1/agent/config", "/v1/agent/config"),
    ],
)
def test_the_control_planes_log_writes_each_link_without_its_secret(path: str, logged: str) -> None:
    assert logged_path(path) == logged
