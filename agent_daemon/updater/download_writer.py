"""The download's bytes written to the `.part` and hashed in two threads of their own while the
next ones arrive (`WrittenBehind`), made durable a few MiB at a time.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import BinaryIO

from agent_daemon.updater.download_staging import Received

__all__ = ["WrittenBehind"]


class WrittenBehind:
    """Writes and hashes the body's chunks in two threads of their own while the next ones arrive.

    hashlib and file writes release the GIL, so the SHA-256 of a 22 MB build (~11 ms here), its
    copies into the page cache and their way to the disk overlap the network and each other
    instead of following every chunk (docs/agent_updater.md, the download benchmark). At most
    `_AHEAD` batches wait in each, so a slow disk holds the download back rather than filling
    memory. A write error is raised to the reading side at its next chunk; `close` waits until
    every batch is written and hashed.
    """

    # Chunks (the connection's reads, up to `download._READ_BYTES`; 64 KiB before) are handed
    # over in batches of about 1 MiB: a hand-over per 64 KiB chunk woke a thread 340 times for a
    # 22 MB build, each wake-up a GIL hand-off that cost more than the write it carried.
    _BATCH = 1024 * 1024
    _AHEAD = 4
    # The bytes are made durable as they arrive, a few MiB at a time, so the fsync that ends the
    # download finds little left to write: the disk's work overlaps the network's.
    _SYNC_EVERY = 4 * 1024 * 1024

    def __init__(self, sink: BinaryIO, received: Received) -> None:
        self._sink = sink
        self._digest = received.digest
        self._to_write: queue.Queue[list[bytes] | None] = queue.Queue(maxsize=self._AHEAD)
        self._to_hash: queue.Queue[list[bytes] | None] = queue.Queue(maxsize=self._AHEAD)
        self._batch: list[bytes] = []
        self._batched = 0
        self._error: BaseException | None = None
        self._unsynced = 0
        self._threads = [
            threading.Thread(target=self._drain, args=(queue_, work), name=name, daemon=True)
            for queue_, work, name in (
                (self._to_write, self._write, "download-writer"),
                (self._to_hash, self._hash, "download-hasher"),
            )
        ]
        for thread in self._threads:
            thread.start()

    def _write(self, batch: list[bytes]) -> None:
        for chunk in batch:
            self._sink.write(chunk)
            self._unsynced += len(chunk)
        if self._unsynced >= self._SYNC_EVERY:
            self._sink.flush()
            os.fdatasync(self._sink.fileno())
            self._unsynced = 0

    def _hash(self, batch: list[bytes]) -> None:
        for chunk in batch:
            self._digest.update(chunk)

    def _drain(
        self, batches: queue.Queue[list[bytes] | None], work: Callable[[list[bytes]], None]
    ) -> None:
        while (batch := batches.get()) is not None:
            if self._error is not None:
                continue  # keep taking batches, so the reading side never blocks on a dead thread
            try:
                work(batch)
            except BaseException as exc:  # handed to the reading side, which raises it
                self._error = exc

    def put(self, chunk: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._batch.append(chunk)
        self._batched += len(chunk)
        if self._batched >= self._BATCH:
            self._hand_over()

    def _hand_over(self) -> None:
        if self._batch:
            self._to_write.put(self._batch)
            self._to_hash.put(self._batch)
            self._batch, self._batched = [], 0

    def close(self) -> None:
        self._hand_over()
        self._to_write.put(None)
        self._to_hash.put(None)
        for thread in self._threads:
            thread.join()
        if self._error is not None:
            raise self._error
