"""The updater's download path against a plain download, same artifact, same run.

A 22 MB agent build (the size DESIGN.md rule 9 assumes) is served over loopback by the world kit's
threaded artifact server. The baseline streams it to a file with plain httpx. The measured path is
what an update does before the switch: verify the signed manifest, download with hashing, the
length limit and the free-space check, unpack into versions/<v>/ with member checks and fsyncs,
write `.complete`, run the self-test. Each is repeated `--rounds` times; the medians and their
ratio are printed.

    PYTHONPATH=. .venv/bin/python bench/download.py [--rounds 5] [--megabytes 22]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent_daemon.updater.download import ArtifactSpec, DownloadLimits, download_artifact
from agent_daemon.updater.install import install_build, self_test
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.verify import verify_release
from nachtwacht.worlds.artifact_server import artifact_server
from nachtwacht.worlds.releases import ReleaseFactory

VERSION = "1.5.0"


def plain_download(client: httpx.Client, url: str, target: Path) -> None:
    with client.stream("GET", url) as response, target.open("wb") as out:
        for chunk in response.iter_bytes():
            out.write(chunk)


def updater_path(
    client: httpx.Client, url: str, work: Path, manifest_bytes: bytes, signature: bytes,
    trusted: dict[str, Ed25519PublicKey],
) -> float:  # fmt: skip
    """Runs the path; returns the seconds spent in verify + download alone."""
    started = time.perf_counter()
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
    download_seconds = time.perf_counter() - started
    build = install_build(
        InstallLayout(install_root),
        artifact,
        version=VERSION,
        sha256=manifest.sha256,
        unpacked_size=manifest.unpacked_size,
    )
    self_test(build, VERSION)
    return download_seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--megabytes", type=float, default=22.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nachtwacht-bench-") as temp:
        base = Path(temp)
        factory = ReleaseFactory(
            workdir=base / "builds",
            issued_at=datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1),
        )
        body = factory.artifact(VERSION, padding_bytes=int(args.megabytes * 1e6))
        release = factory.sign(body, version=VERSION, manifest_version=42)
        manifest_bytes, signature, trusted = (
            release.manifest_bytes,
            release.signature,
            factory.trusted,
        )
        baseline: list[float] = []
        measured: list[float] = []
        download_only: list[float] = []
        with artifact_server() as server:
            url = server.serve("/artifact", body)
            with httpx.Client() as client:
                for round_number in range(args.rounds):
                    work = base / f"round-{round_number}"
                    work.mkdir()
                    started = time.perf_counter()
                    plain_download(client, url, work / "plain.tar.gz")
                    baseline.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    download_only.append(
                        updater_path(client, url, work, manifest_bytes, signature, trusted)
                    )
                    measured.append(time.perf_counter() - started)
                    shutil.rmtree(work)
    plain, full = statistics.median(baseline), statistics.median(measured)
    megabytes = len(body) / 1e6
    print(f"artifact: {megabytes:.1f} MB over loopback, {args.rounds} rounds (medians)")
    print(f"baseline  plain httpx stream to a file:            {plain:7.3f} s "
          f"({megabytes / plain:7.1f} MB/s)")  # fmt: skip
    print(f"measured  verify+download+hash+limit+install+test: {full:7.3f} s "
          f"({megabytes / full:7.1f} MB/s)")  # fmt: skip
    fetch = statistics.median(download_only)
    print(f"  of which verify+download+hash+limit:             {fetch:7.3f} s "
          f"(ratio {fetch / plain:.2f}x; the rest is gunzip, fsync and the self-test)")  # fmt: skip
    print(f"ratio     measured / baseline:                     {full / plain:7.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
