"""Delta updates: how big a patch is, how long it takes to make and to apply, and the peak memory
of applying it, for the two candidate formats, on two realistic agent builds, in one run.

The two builds are what a point release of this project's agent looks like on a host: the same
dependency tree (cryptography, pydantic, httpx, tuf, … as installed in this virtual environment)
and the project's own agent packages at two commits (`--base-ref`, default ten commits that touched
them back, and the work tree). Both are `tar.gz` agent builds; the patch turns the base's
*uncompressed tar* into the target's, as the release tool makes it.

Candidates: zstd patch-from as the product makes it (signed_release/delta.py: the base tar as the
prefix, long-distance matching, a window covering both tars) and bsdiff4. Each apply runs in a fresh
child process whose peak RSS (VmHWM) is read from the kernel; the baseline child only reads the base
tar and the patch into memory, so the ratio beside it is what applying adds. The full download at
10 Mbit/s is computed from the artifact's size, beside the patch's.

    PYTHONPATH=. .venv/bin/python bench/delta.py [--base-ref REF] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bsdiff4

from signed_release.delta import (
    make_patch,
    patch_memory_bound,
)

REPO = Path(__file__).resolve().parent.parent
AGENT_PACKAGES = ("ground", "shared_planner", "signed_release", "agent_daemon", "nachtwacht")
DEPENDENCIES = (
    "cryptography",
    "cffi",
    "pycparser",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_extensions.py",
    "typing_inspection",
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "sniffio",
    "idna",
    "certifi",
    "socksio",
    "tuf",
    "securesystemslib",
    "platformdirs",
    "apscheduler",
    "tzlocal",
    "tzdata",
    "tomli_w",
)
_MTIME = 1_767_225_600
LINK_MBIT = 10


def _add(archive: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = _MTIME
    archive.addfile(info, io.BytesIO(data))


def _add_tree(archive: tarfile.TarFile, root: Path, prefix: str) -> None:
    paths = [root] if root.is_file() else sorted(root.rglob("*"))
    for path in paths:
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        relative = path.name if root.is_file() else path.relative_to(root).as_posix()
        name = f"{prefix}/{relative}" if root.is_dir() else f"{prefix}/{path.name}"
        _add(archive, name, path.read_bytes(), 0o755 if path.stat().st_mode & 0o100 else 0o644)


def _packages_at(ref: str, into: Path) -> Path:
    """The project's agent packages as they were at `ref` (the work tree for `WORKTREE`)."""
    if ref == "WORKTREE":
        return REPO
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref, *AGENT_PACKAGES],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def build(version: str, packages_root: Path, out: Path) -> None:
    """An agent build: `bin/provibr-agent`, the dependency tree and the agent's own packages."""
    site = Path(sysconfig.get_paths()["purelib"])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        script = f"#!/usr/bin/env python3\nprint({version!r})\n".encode()
        _add(archive, "bin/provibr-agent", script, 0o755)
        for dependency in DEPENDENCIES:
            if (site / dependency).exists():
                _add_tree(archive, site / dependency, f"lib/{dependency}")
        for package in AGENT_PACKAGES:
            _add_tree(archive, packages_root / package, f"lib/{package}")
    out.write_bytes(gzip.compress(raw.getvalue(), compresslevel=9, mtime=0))


def _default_base_ref() -> str:
    commits = subprocess.run(
        ["git", "-C", str(REPO), "log", "--format=%H", "-n", "11", "--", *AGENT_PACKAGES],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return commits[-1]


def make_bsdiff(base: bytes, target: bytes) -> bytes:
    return bytes(bsdiff4.diff(base, target))


_APPLY_CHILD = r"""
import json, sys, time
from pathlib import Path
kind, base_path, patch_path, out_path, length, sha = sys.argv[1:7]
start = time.perf_counter()
if kind == "baseline":
    base = Path(base_path).read_bytes(); patch = Path(patch_path).read_bytes()
elif kind == "bsdiff4":
    import bsdiff4
    base = Path(base_path).read_bytes()
    Path(out_path).write_bytes(bsdiff4.patch(base, Path(patch_path).read_bytes()))
else:
    from signed_release.delta import apply_patch
    apply_patch(Path(base_path), Path(patch_path), Path(out_path),
                target_length=int(length), target_sha256=sha)
elapsed = time.perf_counter() - start
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so it would report the parent's.
peak = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(json.dumps({"seconds": elapsed, "peak_kib": int(peak)}))
"""


def apply_in_child(
    kind: str, base: Path, patch: Path, out: Path, length: int, sha: str
) -> tuple[float, int]:
    answer = subprocess.run(
        [
            sys.executable,
            "-c",
            _APPLY_CHILD,
            kind,
            str(base),
            str(patch),
            str(out),
            str(length),
            sha,
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    figures = json.loads(answer.stdout)
    return figures["seconds"], figures["peak_kib"]


def _timed(function: Callable[[], bytes]) -> tuple[bytes, float]:
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-ref", help="the commit of the base build (default: see above)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base_ref = args.base_ref or _default_base_ref()
    with tempfile.TemporaryDirectory(prefix="bench-delta-") as temp:
        work = Path(temp)
        base_gz, target_gz = work / "base.tar.gz", work / "target.tar.gz"
        build("1.4.0", _packages_at(base_ref, work / "base-src"), base_gz)
        build("1.4.1", _packages_at("WORKTREE", work), target_gz)
        base_tar, target_tar = (
            gzip.decompress(base_gz.read_bytes()),
            gzip.decompress(target_gz.read_bytes()),
        )
        (work / "base.tar").write_bytes(base_tar)
        full = target_gz.stat().st_size
        target_sha = hashlib.sha256(target_tar).hexdigest()
        print(
            f"builds: base {base_ref[:10]} → work tree; artifact {full / 1e6:.1f} MB "
            f"(tar {len(target_tar) / 1e6:.1f} MB); full download at {LINK_MBIT} Mbit/s "
            f"{full * 8 / (LINK_MBIT * 1e6):.1f} s"
        )
        makers: dict[str, Callable[[bytes, bytes], bytes]] = {
            "zstd": make_patch,
            "bsdiff4": make_bsdiff,
        }
        baseline_peaks: list[int] = []
        for name, maker in makers.items():
            make_times: list[float] = []
            apply_times: list[float] = []
            peaks: list[int] = []
            patch = b""
            for _ in range(args.rounds):
                patch, seconds = _timed(lambda maker=maker: maker(base_tar, target_tar))  # type: ignore[misc]
                make_times.append(seconds)
                patch_path = work / f"{name}.patch"
                patch_path.write_bytes(patch)
                out = work / f"{name}.out"
                seconds, peak = apply_in_child(
                    name, work / "base.tar", patch_path, out, len(target_tar), target_sha
                )
                if hashlib.sha256(out.read_bytes()).hexdigest() != target_sha:
                    raise SystemExit(f"{name}: the applied patch is not the target tar")
                apply_times.append(seconds)
                peaks.append(peak)
                _, baseline_peak = apply_in_child(
                    "baseline", work / "base.tar", patch_path, out, len(target_tar), target_sha
                )
                baseline_peaks.append(baseline_peak)
            share = len(patch) / full
            print(
                f"{name:8} patch {len(patch) / 1e3:8.1f} kB = {share:6.1%} of the artifact "
                f"({len(patch) * 8 / (LINK_MBIT * 1e6):5.2f} s at {LINK_MBIT} Mbit/s, "
                f"{full / max(len(patch), 1):5.1f}x fewer bytes); "
                f"make {statistics.median(make_times):6.2f} s; "
                f"apply {statistics.median(apply_times):5.2f} s, "
                f"peak RSS {statistics.median(peaks) / 1024:6.1f} MiB "
                f"(baseline child holding base + patch "
                f"{statistics.median(baseline_peaks) / 1024:6.1f} MiB, ratio "
                f"{statistics.median(peaks) / statistics.median(baseline_peaks):4.2f})"
            )
        bound = patch_memory_bound(len(base_tar), len(target_tar))
        print(f"zstd apply: stated memory bound (base tar + window) {bound / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
