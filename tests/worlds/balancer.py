"""Debian's nginx in front of control-plane replicas, started from the shipped site file
(`packaging/nginx/nachtwacht.conf`) with only its addresses and paths replaced.

    with nginx_balancer(folder, [replica.base_url for replica in replicas]) as balancer:
        balancer.url        # https://localhost:PORT, a certificate from balancer.ca_file
        balancer.access()   # the access log's lines, one per request, with the replicas tried
        balancer.reload([...])  # another list of replicas, as an operator's edit and reload

nginx runs in the foreground under the test, one worker (so its choice of replica is the
round robin's, in order), its main file, logs and temporary files in `folder`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.agent_daemon.network_support.pki import make_pki
from tests.worlds.processes import REPO_ROOT

__all__ = ["SHIPPED_SITE", "Balancer", "nginx_balancer", "site_for_test"]

SHIPPED_SITE = REPO_ROOT / "packaging" / "nginx" / "nachtwacht.conf"
SHIPPED_REPLICAS = ("10.0.0.11:8080", "10.0.0.12:8080")
# A deadline for a failure to start, not a speed expectation.
START_DEADLINE_SECONDS = 30.0


@dataclass(frozen=True)
class Balancer:
    url: str
    ca_file: Path
    access_log: Path
    error_log: Path
    process: subprocess.Popen[bytes]
    site: Path
    port: int
    tls_dir: Path

    def access(self) -> list[str]:
        return self.access_log.read_text(errors="replace").splitlines()

    def reload(self, replica_urls: Sequence[str]) -> None:
        """The site rewritten for these replicas and nginx told to reload it (SIGHUP, what
        `systemctl reload nginx` sends): new workers take the new list, the old ones finish
        the requests they hold."""
        self.site.write_text(_site(self.port, replica_urls, self.tls_dir, self.access_log.parent))
        self.process.send_signal(signal.SIGHUP)


def site_for_test(
    shipped: str, *, port: int, replicas: Sequence[str], tls_dir: Path, log_dir: Path
) -> str:
    """The shipped site with its listen port, replicas, certificate and log paths replaced; each
    replaced text must be found exactly once, so a change to the shipped file fails here, loudly,
    instead of testing something else."""

    def replaced(text: str, old: str, new: str) -> str:
        found = text.count(old)
        assert found == 1, f"{SHIPPED_SITE.name}: {old!r} found {found} times, expected once"
        return text.replace(old, new)

    extra = len(replicas) - len(SHIPPED_REPLICAS)
    assert extra >= 0, f"at least {len(SHIPPED_REPLICAS)} replicas, not {len(replicas)}"
    site = replaced(shipped, "listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
    for shipped_address, address in zip(SHIPPED_REPLICAS, replicas, strict=False):
        site = replaced(site, f"server {shipped_address} ", f"server {address} ")
    last = f"server {replicas[len(SHIPPED_REPLICAS) - 1]} "
    for address in replicas[len(SHIPPED_REPLICAS) :]:
        # Added as the operator would: another line like the last.
        line = next(line for line in site.splitlines() if last in line)
        site = site.replace(line, line + "\n" + line.replace(last, f"server {address} "))
    site = replaced(site, "/etc/nginx/tls/nachtwacht.crt", str(tls_dir / "server.pem"))
    site = replaced(site, "/etc/nginx/tls/nachtwacht.key", str(tls_dir / "server.key"))
    site = replaced(site, "/var/log/nginx/nachtwacht.access.log", str(log_dir / "access.log"))
    return replaced(site, "/var/log/nginx/nachtwacht.error.log", str(log_dir / "error.log"))


def _site(port: int, replica_urls: Sequence[str], tls_dir: Path, log_dir: Path) -> str:
    return site_for_test(
        SHIPPED_SITE.read_text(),
        port=port,
        replicas=[url.removeprefix("http://").rstrip("/") for url in replica_urls],
        tls_dir=tls_dir,
        log_dir=log_dir,
    )


def _main_file(folder: Path, site: Path) -> str:
    """What Debian's /etc/nginx/nginx.conf provides around a site, for a test's own nginx."""
    # As root, nginx's workers would change to `nobody`, who cannot enter the test's folders.
    user = "user root root;\n" if os.geteuid() == 0 else ""
    temporary = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"{user}worker_processes 1;\npid {folder / 'nginx.pid'};\n"
        f"error_log {folder / 'main-error.log'} info;\n"
        "events { worker_connections 1024; }\n"
        f"http {{\n    access_log off;\n{temporary}\n    include {site};\n}}\n"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _answers_tls(port: int, ca_file: Path) -> bool:
    context = ssl.create_default_context(cafile=str(ca_file))
    with (
        contextlib.suppress(OSError),
        socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
        context.wrap_socket(raw, server_hostname="localhost"),
    ):
        return True
    return False


@contextlib.contextmanager
def nginx_balancer(folder: Path, replica_urls: Sequence[str]) -> Iterator[Balancer]:
    """nginx with the shipped site in front of the replicas at `replica_urls` (`http://host:port`),
    its certificate for `localhost` signed by a CA made in `folder`."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert Path(nginx).exists(), "nginx is not installed: bin/test installs Debian's as root"
    folder.mkdir(parents=True)
    pki = make_pki(folder / "tls")
    logs = folder / "logs"
    logs.mkdir()
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (folder / kind).mkdir()
    port = _free_port()
    site = folder / "nachtwacht.conf"
    site.write_text(_site(port, replica_urls, pki.server_cert.parent, logs))
    main = folder / "nginx.conf"
    main.write_text(_main_file(folder, site))
    command = [nginx, "-p", str(folder), "-c", str(main), "-e", str(folder / "main-error.log")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen(
        [*command, "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + START_DEADLINE_SECONDS
        while not _answers_tls(port, pki.ca):
            assert process.poll() is None, (folder / "main-error.log").read_text()
            assert time.monotonic() < deadline, "nginx did not answer on its port"
            time.sleep(0.05)
        yield Balancer(
            url=f"https://localhost:{port}",
            ca_file=pki.ca,
            access_log=logs / "access.log",
            error_log=logs / "error.log",
            process=process,
            site=site,
            port=port,
            tls_dir=pki.server_cert.parent,
        )
    finally:
        # SIGQUIT: a graceful stop, which writes out the access log's last lines.
        if process.poll() is None:
            process.send_signal(signal.SIGQUIT)
            try:
                process.wait(timeout=START_DEADLINE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
