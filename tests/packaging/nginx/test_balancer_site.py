"""Requests through Debian's nginx with the shipped site (`packaging/nginx/nachtwacht.conf`) to
two real replicas over one database: what the site must pass on, and the one retry it allows."""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from ground.contract import CONFIG_PATH, HOST_ID_HEADER
from signed_release.keys import generate_key_files, load_private_key
from tests.agent_daemon.network_support.pki import make_pki
from tests.conftest import RunningControlPlane
from tests.control_plane.conftest import sign_release
from tests.control_plane.lock_waits import lock_waits
from tests.worlds.balancer import SHIPPED_SITE, Balancer, nginx_balancer
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"
# nginx's own default refuses bodies over 1 MiB; a release carries its build in the body.
LARGER_THAN_NGINX_DEFAULT = 3 * 1024 * 1024


def wait_for_lines(balancer: Balancer, containing: str) -> list[str]:
    """The access log's lines holding `containing`, once there is one: nginx writes a request's
    line after it has sent the answer, so a client can read the log before it is there."""
    wait_until(
        lambda: any(containing in line for line in balancer.access()),
        what=f"nginx's access log line for {containing}",
    )
    return [line for line in balancer.access() if containing in line]


@pytest.fixture
def release_keys(tmp_path: Path) -> Path:
    return generate_key_files(tmp_path / "release-keys")[1].parent


@pytest.fixture
def start_replica(
    control_plane_server: Callable[..., RunningControlPlane], release_keys: Path
) -> Callable[[], RunningControlPlane]:
    """Replicas over the test's database that all show 03:01 CET on 2026-11-30, almost frozen:
    the 03:00 slot's window is open."""
    fake_clock = f"2026-11-30T02:01:00Z,anchor={time.time()!r},speed=0.001"
    env = {"NACHTWACHT_RELEASE_PUBLIC_KEYS": str(release_keys / "release.pub")}
    return lambda: control_plane_server(fake_clock=fake_clock, env=env)


@pytest.fixture
def two_replicas(start_replica: Callable[[], RunningControlPlane]) -> list[RunningControlPlane]:
    return [start_replica() for _ in range(2)]


@pytest.fixture
def balancer(tmp_path: Path, two_replicas: list[RunningControlPlane]) -> Iterator[Balancer]:
    with nginx_balancer(tmp_path / "nginx", [r.base_url for r in two_replicas]) as running:
        yield running


def through(balancer: Balancer, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=balancer.url,
        verify=ssl.create_default_context(cafile=str(balancer.ca_file)),
        headers={"Authorization": f"Bearer {key}"},
        timeout=120,
    )


def publish_over_http(
    balancer: Balancer, operator_key: str, release_keys: Path, artifact: bytes
) -> httpx.Response:
    release = sign_release(load_private_key(release_keys / "release.key"), artifact=artifact)
    with through(balancer, operator_key) as operator:
        return operator.post(
            "/v1/admin/releases",
            json={
                "manifest_b64": base64.b64encode(release.manifest).decode(),
                "signature_b64": base64.b64encode(release.signature).decode(),
                "artifact_b64": base64.b64encode(release.artifact).decode(),
            },
        )


def test_the_site_passes_nginx_t_within_debians_own_nginx_conf(tmp_path: Path) -> None:
    """As installed: Debian's /etc/nginx/nginx.conf includes the site where it includes
    sites-enabled/, with its own defaults around it (its log formats, TLS protocols, gzip)."""
    stock = Path("/etc/nginx/nginx.conf")
    assert stock.exists(), "Debian's nginx is not installed: bin/test installs it as root"
    pki = make_pki(tmp_path / "tls")
    site = SHIPPED_SITE.read_text()
    for old, new in (
        ("/etc/nginx/tls/nachtwacht.crt", pki.server_cert),
        ("/etc/nginx/tls/nachtwacht.key", pki.server_key),
        ("/var/log/nginx/nachtwacht.access.log", tmp_path / "access.log"),
        ("/var/log/nginx/nachtwacht.error.log", tmp_path / "error.log"),
    ):
        assert site.count(old) == 1, old
        site = site.replace(old, str(new))
    (tmp_path / "nachtwacht.conf").write_text(site)
    main = stock.read_text()
    sites_enabled = "include /etc/nginx/sites-enabled/*;"
    assert main.count(sites_enabled) == 1
    (tmp_path / "nginx.conf").write_text(
        main.replace(sites_enabled, f"include {tmp_path / 'nachtwacht.conf'};")
    )
    checked = subprocess.run(
        ["nginx", "-t", "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": f"{os.environ.get('PATH', '')}:/usr/sbin"},
    )
    assert checked.returncode == 0, checked.stderr
    assert "[warn]" not in checked.stderr, checked.stderr


def test_a_release_larger_than_nginx_default_body_limit_is_published_through_it(
    balancer: Balancer, two_replicas: list[RunningControlPlane], release_keys: Path
) -> None:
    operator_key = two_replicas[0].create_operator_key()
    answer = publish_over_http(
        balancer, operator_key, release_keys, os.urandom(LARGER_THAN_NGINX_DEFAULT)
    )
    assert answer.status_code == 201, answer.text[:500]
    assert answer.json()["version"] == "1.5.0"


def test_a_body_over_the_agents_limit_is_refused_at_the_balancer(
    balancer: Balancer, two_replicas: list[RunningControlPlane]
) -> None:
    org = two_replicas[0].create_org("Acme")
    agent = two_replicas[0].enroll_agent(org["org_id"], "web-01")
    with through(balancer, agent["agent_key"]) as client:
        answer = client.post("/v1/agent/claims", content=b"x" * (65 * 1024))
    assert answer.status_code == 413
    # nginx writes a request's line once it has answered: wait for it, then read it.
    claim_lines = wait_for_lines(balancer, "/v1/agent/claims")
    assert claim_lines and all("upstream=-" in line for line in claim_lines), claim_lines


def test_a_panel_form_over_the_limit_gets_the_panels_page_through_the_balancer(
    balancer: Balancer,
) -> None:
    """A pasted 100 kB password: nginx passes it on, and the replica answers with the panel's page
    in the reader's language, not nginx's own 413 page."""
    with httpx.Client(
        base_url=balancer.url,
        verify=ssl.create_default_context(cafile=str(balancer.ca_file)),
        timeout=120,
    ) as reader:
        answer = reader.post(
            "/panel/sign-in/person",
            data={"csrf": "x", "email": "anna@example.com", "password": "x" * 100_000},
            headers={"accept-language": "nl"},
        )
    assert answer.status_code == 413
    assert answer.headers["content-language"] == "nl"
    assert "Het formulier was te groot" in answer.text
    assert "nginx" not in answer.text


def test_the_install_command_names_the_balancers_https_address(
    balancer: Balancer, two_replicas: list[RunningControlPlane]
) -> None:
    org = two_replicas[0].create_org("Acme")
    with through(balancer, org["panel_key"]) as panel:
        answer = panel.post("/v1/enrollment-tokens", json={"uses": 1})
    assert answer.status_code == 201, answer.text
    assert f"--url {balancer.url} " in answer.json()["install_command"]


def test_a_claim_sent_to_a_replica_that_dies_before_answering_is_answered_by_the_other(
    tmp_path: Path, two_replicas: list[RunningControlPlane], release_keys: Path
) -> None:
    doomed, survivor = two_replicas
    operator_key = doomed.create_operator_key()
    org = doomed.create_org("Acme")
    agent = doomed.enroll_agent(org["org_id"], "web-01")
    database_url = doomed.database_url
    answers: list[httpx.Response] = []
    # One nginx worker, a round robin in the order of the site's lines: the first request goes
    # to the first replica, `doomed`.
    with nginx_balancer(tmp_path / "nginx", [doomed.base_url, survivor.base_url]) as balancer:
        published = publish_over_http(balancer, operator_key, release_keys, b"build" * 100)
        assert published.status_code == 201, published.text
        # The publish went to `doomed`, this goes to `survivor`: the claim's turn is `doomed`'s.
        with through(balancer, operator_key) as operator:
            assert operator.get("/healthz").status_code == 200
        with psycopg.connect(database_url) as holder:
            # A grant begins by reading the brake FOR SHARE: holding its row keeps the claim in
            # `doomed` until the replica is gone, as a replica killed mid-request would.
            holder.execute("SELECT 1 FROM platform_brake FOR UPDATE")

            def claim() -> None:
                with through(balancer, agent["agent_key"]) as client:
                    answers.append(
                        client.post(
                            "/v1/agent/claims",
                            json={"slot_key": SLOT, "from_version": "1.4.1"},
                        )
                    )

            asking = threading.Thread(target=claim)
            asking.start()
            wait_until(lambda: lock_waits(database_url) >= 1, what="the claim to wait in doomed")
            doomed.process.kill()
            doomed.process.wait()
            # The dead replica's session still waits; the retried claim waits beside it (or,
            # not retried, the balancer has answered already).
            wait_until(
                lambda: answers or lock_waits(database_url) >= 2,
                what="the retried claim in the survivor",
            )
            holder.rollback()
        asking.join(timeout=120)
        claim_lines = wait_for_lines(balancer, "/v1/agent/claims")
    assert [answer.status_code for answer in answers] == [201], [a.text for a in answers]
    doomed_at = doomed.base_url.removeprefix("http://").rstrip("/")
    survivor_at = survivor.base_url.removeprefix("http://").rstrip("/")
    assert len(claim_lines) == 1 and f"upstream={doomed_at}, {survivor_at} " in claim_lines[0], (
        claim_lines
    )
    with psycopg.connect(database_url) as conn:
        counted: Any = conn.execute("SELECT count(*) FROM runs").fetchone()
        tokens: Any = conn.execute("SELECT count(*) FROM tokens").fetchone()
    assert (counted[0], tokens[0]) == (1, 1)


def test_a_replica_added_and_one_removed_with_a_reload_fail_no_poll(
    tmp_path: Path,
    two_replicas: list[RunningControlPlane],
    start_replica: Callable[[], RunningControlPlane],
) -> None:
    first, second = two_replicas
    org = first.create_org("Acme")
    agent = first.enroll_agent(org["org_id"], "web-01")
    answers: list[int | str] = []
    stop = threading.Event()

    def poll(balancer: Balancer) -> None:
        # As an agent polls: one connection kept between polls, idle in between (an agent's is
        # idle for a minute; a tenth of a second here), so a reload finds it idle and closes it.
        with through(balancer, agent["agent_key"]) as client:
            while not stop.wait(0.1):
                try:
                    answer = client.get(
                        CONFIG_PATH,
                        params={"channel": "stable", "platform": "linux-x86_64"},
                        headers={HOST_ID_HEADER: "host-web-01"},
                    )
                except httpx.HTTPError as exc:
                    answers.append(repr(exc))
                else:
                    answers.append(answer.status_code)

    def served_by(balancer: Balancer, replica: RunningControlPlane, *, after: int) -> bool:
        at = f"upstream={replica.base_url.removeprefix('http://').rstrip('/')} "
        return any(at in line for line in balancer.access()[after:])

    with nginx_balancer(tmp_path / "nginx", [first.base_url, second.base_url]) as balancer:
        polling = threading.Thread(target=poll, args=(balancer,))
        polling.start()
        try:
            # Added once it answers (its ready line came), then named in the site and reloaded.
            third = start_replica()
            balancer.reload([first.base_url, second.base_url, third.base_url])
            wait_until(lambda: served_by(balancer, third, after=0), what="the third replica")
            # Removed the other way round: out of the site first, stopped once nginx's workers
            # of the old list have finished (the log's lines from then on never name it).
            balancer.reload([second.base_url, third.base_url])
            reloaded_at = len(balancer.access())
            wait_until(
                lambda: (
                    len(balancer.access()) > reloaded_at + 20
                    and not served_by(balancer, first, after=reloaded_at + 10)
                ),
                what="requests after the reload without the first replica",
            )
            assert first.stop() == 0
            served = len(balancer.access())
            wait_until(lambda: len(balancer.access()) > served + 20, what="polls after the stop")
        finally:
            stop.set()
            polling.join(timeout=60)
    assert answers and set(answers) <= {200, 304}, [a for a in answers if a not in {200, 304}]
