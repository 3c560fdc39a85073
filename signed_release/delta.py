"""Delta updates: a patch that turns one build's uncompressed tar into another's.

Why the tar and not the artifact: two gzip streams of nearly equal trees share almost no bytes, and
an agent cannot re-gzip a result byte for byte (zlib versions differ), so a patch between `.tar.gz`
files is both large and unverifiable. Between the uncompressed tars it is small, and the result is
checked against the signed tar hash (`Manifest.tar_sha256`) before a single member is unpacked.

The format is zstd's "patch-from" (what `zstd --patch-from` writes): one zstd frame of the target
tar compressed with the base tar as its *prefix*, long-distance matching on and a window that covers
both tars, so every byte the two share is a back-reference. Chosen over bsdiff4 and over zstd with
the base as a dictionary by `bench/delta.py`: patches of the same size as bsdiff4's, made in about a
second instead of most of a minute, applied as a stream whose output is counted as it leaves the
decoder — bsdiff4 allocates the whole result up front from a size the patch itself declares, and a
dictionary (rather than a prefix) is not searched by long-distance matching, so below level 15 the
patch is nearly the full tar.

Bounds on applying, both from signed or verified facts, never from the patch:
* memory: the base tar (the dictionary) plus the decoder's window, at most `window_bytes(base,
  target)` — a frame that asks for a larger window is refused by the decoder before it allocates;
* output: the signed target tar length; one byte more and applying stops (a patch bomb ends there).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pyzstd

from signed_release.errors import ArtifactError

__all__ = [
    "PATCH_FORMAT",
    "PatchBeyondMemoryBound",
    "PatchRefused",
    "apply_patch",
    "gunzip_artifact",
    "make_patch",
    "patch_memory_bound",
    "tar_facts",
    "window_bytes",
]

PATCH_FORMAT: Final = "zstd-patch-from"
# With long-distance matching over a prefix, level 9 is within a few per cent of level 19's size in
# a fiftieth of the time (bench/delta.py).
_LEVEL = 9
_CHUNK = 1024 * 1024
# The decoder accepts no window above 2 GiB on 64-bit builds; a build is far smaller.
_MAX_WINDOW_LOG = 31
_MIN_WINDOW_LOG = 20


class PatchRefused(ArtifactError):
    """A patch cannot be applied or its result is not the signed target; names what and why."""


class PatchBeyondMemoryBound(PatchRefused):
    """Applying the patch would need a decoder window beyond the bound: refused before any
    memory is taken."""


def window_bytes(base_length: int, target_length: int) -> int:
    """The decoder window a patch between tars of these lengths needs: a power of two covering
    both, so the last byte of the target can still refer to the first byte of the base."""
    needed = max(base_length + target_length, 1)
    log = max(_MIN_WINDOW_LOG, (needed - 1).bit_length())
    if log > _MAX_WINDOW_LOG:
        raise PatchBeyondMemoryBound(
            f"base and target tars: {needed} bytes together need a window above "
            f"2**{_MAX_WINDOW_LOG} bytes (expected builds far smaller)"
        )
    return 1 << log


def patch_memory_bound(base_length: int, target_length: int | None = None) -> int:
    """The most memory applying a patch takes beyond the interpreter: the base tar held as the
    dictionary plus the decoder's window."""
    return base_length + window_bytes(base_length, target_length or base_length)


def _prefix(base: bytes) -> tuple[pyzstd.ZstdDict, int]:
    return pyzstd.ZstdDict(base, is_raw=True).as_prefix


def make_patch(base_tar: bytes, target_tar: bytes) -> bytes:
    """The patch from `base_tar` to `target_tar` (both uncompressed tars)."""
    window_log = window_bytes(len(base_tar), len(target_tar)).bit_length() - 1
    options: dict[int, int] = {
        pyzstd.CParameter.compressionLevel: _LEVEL,
        pyzstd.CParameter.windowLog: window_log,
        pyzstd.CParameter.enableLongDistanceMatching: 1,
        pyzstd.CParameter.checksumFlag: 1,
    }
    return pyzstd.compress(target_tar, level_or_option=options, zstd_dict=_prefix(base_tar))


def apply_patch(
    base_tar: Path, patch: Path, out: Path, *, target_length: int, target_sha256: str
) -> None:
    """Write to `out` the tar `patch` makes from `base_tar`, or raise PatchRefused. The result is
    durable (fsynced) and has exactly the signed length and hash when this returns; on any refusal
    `out` is removed."""
    try:
        base = base_tar.read_bytes()
    except OSError as exc:
        raise PatchRefused(f"base tar {base_tar}: cannot be read ({exc.strerror})") from exc
    window_log = window_bytes(len(base), target_length).bit_length() - 1
    digest = hashlib.sha256()
    written = 0
    refusal = f"patch {patch.name}: cannot be applied to this base"
    with _removed_on_failure(out, pyzstd.ZstdError, refusal):
        decompressor = pyzstd.ZstdDecompressor(
            zstd_dict=_prefix(base), option={pyzstd.DParameter.windowLogMax: window_log}
        )
        with patch.open("rb") as source, out.open("wb") as sink:
            while not decompressor.eof:
                # One byte past the bound is enough to know the output passes it.
                room = target_length + 1 - written
                data = source.read(_CHUNK) if decompressor.needs_input else b""
                if decompressor.needs_input and not data:
                    raise PatchRefused(
                        f"patch {patch.name}: ends before its frame does (truncated)"
                    )
                chunk = decompressor.decompress(data, min(room, _CHUNK))
                written += len(chunk)
                if written > target_length:
                    raise PatchRefused(
                        f"patch {patch.name}: its output passes the signed target length "
                        f"{target_length} bytes (expected exactly that many)"
                    )
                digest.update(chunk)
                sink.write(chunk)
            if decompressor.unused_data or source.read(1):
                raise PatchRefused(
                    f"patch {patch.name}: bytes follow the end of the patch (expected one frame)"
                )
            sink.flush()
            os.fsync(sink.fileno())
        if written != target_length:
            raise PatchRefused(
                f"patch {patch.name}: makes {written} bytes (expected the signed target length "
                f"{target_length})"
            )
        if digest.hexdigest() != target_sha256:
            raise PatchRefused(
                f"patch {patch.name}: makes a tar with sha256 {digest.hexdigest()} "
                f"(expected the signed {target_sha256})"
            )


@contextlib.contextmanager
def _removed_on_failure(out: Path, decoder_error: type[Exception], refusal: str) -> Iterator[None]:
    """`out` is removed whenever writing it does not finish (a half-written tar must never be
    mistaken for the result); the decoder's own error becomes a PatchRefused saying `refusal`."""
    try:
        yield
    except decoder_error as exc:
        out.unlink(missing_ok=True)
        raise PatchRefused(f"{refusal} ({exc})") from exc
    except BaseException:
        out.unlink(missing_ok=True)
        raise


def tar_facts(tar: Path) -> tuple[int, str]:
    """The length and sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    length = 0
    with tar.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            length += len(chunk)
            digest.update(chunk)
    return length, digest.hexdigest()


def gunzip_artifact(artifact: Path, out: Path, *, limit: int) -> tuple[int, str]:
    """Write the uncompressed tar of a `.tar.gz` artifact to `out`, at most `limit` bytes; its
    length and sha256. Raises PatchRefused past the limit or on a corrupt stream."""
    decoder = zlib.decompressobj(wbits=31)
    digest = hashlib.sha256()
    written = 0
    refusal = f"artifact {artifact.name}: not a gzip stream"
    with (
        _removed_on_failure(out, zlib.error, refusal),
        artifact.open("rb") as source,
        out.open("wb") as sink,
    ):
        while compressed := source.read(_CHUNK):
            data = decoder.decompress(compressed, limit + 1 - written)
            while True:
                written += len(data)
                if written > limit:
                    raise PatchRefused(
                        f"artifact {artifact.name}: its tar passes {limit} bytes "
                        "(expected at most that many)"
                    )
                digest.update(data)
                sink.write(data)
                if not decoder.unconsumed_tail:
                    break
                data = decoder.decompress(decoder.unconsumed_tail, limit + 1 - written)
        if not decoder.eof:
            raise PatchRefused(f"artifact {artifact.name}: the gzip stream ends early")
        sink.flush()
        os.fsync(sink.fileno())
    return written, digest.hexdigest()
