"""The updater's download path against a plain download, same artifact, same run.

A 22 MB agent build (the size the per-organisation cap assumes) is served over loopback by the world
kit's threaded artifact server. The baselines stream it to a file with plain httpx, without and with
an fsync at the end. The measured download is what an update does before unpacking: verify the
signed manifest, download with hashing, the length limit, the free-space check and its fsync. The
unpack (member checks, fsyncs, `.complete`) and the self-test are timed and printed on their own.
Every round runs all three, in alternating order (a shared machine drifts); after a warm-up round,
`--rounds` rounds give the medians and the speed ratios.

    PYTHONPATH=. .venv/bin/python bench/download.py [--rounds 9] [--megabytes 22]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent_daemon.updater.download.fetch import ArtifactSpec, DownloadLimits, download_artifact
from agent_daemon.updater.install import install_build, self_test
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.verify import verify_release
from tests.worlds.artifact_server import artifact_server
from tests.worlds.releases import Release, ReleaseFactory

VERSION = "1.5.0"


def plain_download(client: httpx.Client, url: str, target: Path, *, durable: bool) -> None:
    """The baseline: stream to a file (and, `durable`, fsync it, as any updater must)."""
    with client.stream("GET", url) as response, target.open("wb") as out:
        for chunk in response.iter_bytes():
            out.write(chunk)
        if durable:
            out.flush()
            os.fsync(out.fileno())


@dataclass(kw_only=True)
class Timings:
    plain: list[float] = field(default_factory=list)
    plain_durable: list[float] = field(default_factory=list)
    fetch: list[float] = field(default_factory=list)  # verify + download + hash + limit + fsync
    # The process's CPU time for the same two (the in-process server's share included on both
    # sides): on a loaded machine a steadier figure of each path's own work than the wall clock.
    plain_durable_cpu: list[float] = field(default_factory=list)
    fetch_cpu: list[float] = field(default_factory=list)
    install: list[float] = field(default_factory=list)  # unpack + fsyncs + .complete
    self_test: list[float] = field(default_factory=list)


def updater_path(
    client: httpx.Client, url: str, work: Path, manifest_bytes: bytes, signature: bytes,
    trusted: dict[str, Ed25519PublicKey], timings: Timings,
) -> None:  # fmt: skip
    """The updater's steps before the switch, each timed on its own."""
    started, cpu = time.perf_counter(), time.process_time()
    verified = verify_release(
        manifest_bytes,
        signature,
        trusted,
        installed_version="1.4.1",
        floor=41,
        now=datetime.now(UTC),
        platform="linux-x86_64",
        channel="stable",
    )
    manifest = verified.manifest
    install_root = work / "root"
    install_root.mkdir()
    artifact = download_artifact(
        client,
        ArtifactSpec(url=url, sha256=manifest.sha256, length=manifest.length,
                     unpacked_size=manifest.unpacked_size),
        staging=work / "staging",
        install_root=install_root,
        limits=DownloadLimits(read_timeout=30.0, deadline=900.0, disk_reserve_bytes=0),
    )  # fmt: skip
    timings.fetch.append(time.perf_counter() - started)
    timings.fetch_cpu.append(time.process_time() - cpu)
    started = time.perf_counter()
    build = install_build(
        InstallLayout(install_root),
        artifact,
        version=VERSION,
        sha256=manifest.sha256,
        unpacked_size=manifest.unpacked_size,
    )
    timings.install.append(time.perf_counter() - started)
    started = time.perf_counter()
    self_test(build, VERSION)
    timings.self_test.append(time.perf_counter() - started)


def _timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def one_round(
    client: httpx.Client, url: str, work: Path, release: Release,
    trusted: dict[str, Ed25519PublicKey], timings: Timings, *, updater_first: bool,
) -> None:  # fmt: skip
    """All three paths once; the order alternates between rounds (a shared machine drifts)."""

    def baselines() -> None:
        timings.plain.append(
            _timed(lambda: plain_download(client, url, work / "plain", durable=False))
        )
        cpu = time.process_time()
        timings.plain_durable.append(
            _timed(lambda: plain_download(client, url, work / "durable", durable=True))
        )
        timings.plain_durable_cpu.append(time.process_time() - cpu)

    def updater() -> None:
        updater_path(client, url, work, release.manifest_bytes, release.signature, trusted, timings)

    for step in (updater, baselines) if updater_first else (baselines, updater):
        step()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--megabytes", type=float, default=22.0)
    args = parser.parse_args()
    timings = Timings()
    with tempfile.TemporaryDirectory(prefix="nachtwacht-bench-") as temp:
        base = Path(temp)
        factory = ReleaseFactory(
            workdir=base / "builds",
            issued_at=datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1),
        )
        body = factory.artifact(VERSION, padding_bytes=int(args.megabytes * 1e6))
        release = factory.sign(body, version=VERSION, manifest_version=42)
        with artifact_server() as server:
            url = server.serve("/artifact", body)
            with httpx.Client() as client:
                for round_number in range(args.rounds + 1):
                    if round_number == 1:  # round 0 warmed up: connections, page cache, imports
                        timings = Timings()
                    work = base / f"round-{round_number}"
                    work.mkdir()
                    one_round(
                        client, url, work, release, factory.trusted, timings,
                        updater_first=round_number % 2 == 1,
                    )  # fmt: skip
                    shutil.rmtree(work)
    median = statistics.median
    plain, durable, fetch = (
        median(timings.plain),
        median(timings.plain_durable),
        median(timings.fetch),
    )
    megabytes = len(body) / 1e6
    print(f"artifact: {megabytes:.1f} MB over loopback, {args.rounds} rounds (medians)")
    print(f"plain httpx stream to a file:                 {plain:7.3f} s "
          f"({megabytes / plain:7.1f} MB/s)")  # fmt: skip
    print(f"plain stream to a file + fsync:               {durable:7.3f} s "
          f"({megabytes / durable:7.1f} MB/s)")  # fmt: skip
    print(f"updater: verify+download+hash+limit+fsync:    {fetch:7.3f} s "
          f"({megabytes / fetch:7.1f} MB/s)")  # fmt: skip
    print(f"  then unpack + fsyncs + .complete:           {median(timings.install):7.3f} s")
    print(f"  then the self-test:                         {median(timings.self_test):7.3f} s")
    print(f"speed of the updater's download / plain+fsync: {durable / fetch:6.2f}x (goal >= 0.8)")
    print(
        f"speed of the updater's download / plain:       {plain / fetch:6.2f}x "
        "(the plain one leaves its bytes in the page cache)"
    )
    plain_cpu, fetch_cpu = median(timings.plain_durable_cpu), median(timings.fetch_cpu)
    print(
        f"CPU time (process), plain+fsync {plain_cpu:.3f} s, updater {fetch_cpu:.3f} s: "
        f"{plain_cpu / fetch_cpu:.2f}x"
    )
    # The same ratio round by round (each round ran both, in alternating order): its spread shows
    # how much of a single figure is the machine's noise rather than the code.
    per_round = [
        base / ours for base, ours in zip(timings.plain_durable, timings.fetch, strict=True)
    ]
    print(
        "per round, updater / plain+fsync:             "
        + " ".join(f"{ratio:.2f}" for ratio in per_round)
        + f"  (median {median(per_round):.2f}, {min(per_round):.2f}-{max(per_round):.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
