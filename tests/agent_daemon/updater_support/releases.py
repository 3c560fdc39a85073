"""Hostile agent builds for the updater's attack tests (the ordinary builds and signed releases
come from the kit: `tests.worlds.releases`)."""

from __future__ import annotations

import io
import tarfile


def evil_archive(member_name: str, *, link_to: str | None = None) -> bytes:
    """A tar.gz holding a valid agent entry point plus one hostile member."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        script = b"#!/bin/sh\necho 6.6.6\n"
        info = tarfile.TarInfo("bin/provibr-agent")
        info.size, info.mode = len(script), 0o755
        archive.addfile(info, io.BytesIO(script))
        hostile = tarfile.TarInfo(member_name)
        if link_to is None:
            hostile.size = 3
            archive.addfile(hostile, io.BytesIO(b"pwn"))
        else:
            hostile.type = tarfile.SYMTYPE
            hostile.linkname = link_to
            archive.addfile(hostile)
    return buffer.getvalue()
