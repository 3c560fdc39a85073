"""Reports that could not be delivered yet, on disk, sent in order when the control plane answers.

Each report is one file `<sequence>.json` in the outbox directory, written atomically before the
daemon moves on, so a report survives a crash or a restart. `flush` sends them oldest first and
stops at the first one the control plane cannot take now (offline, busy): order is kept. A report
the control plane refuses for good (a 4xx: e.g. the slot's window closed while the agent was
offline) is moved to `rejected/` with the reason, so one bad report never blocks the rest.

A report the sender keeps for `later` (the replica reached does not have its route yet, during a
rolling upgrade) stays where it is and the flush goes on with the reports behind it, which keep
their order among themselves; it is tried again at the next flush. One the sender has `given_up`
on is moved to `rejected/` with the sender's reason.

The outbox holds at most `MAX_PENDING_REPORTS`: an agent that cannot deliver for a year must not
fill the disk or read for minutes. A flush sends at most `SENT_PER_FLUSH` reports; a backlog
goes out over the next minutes, in its order. A report queued at the bound makes room by setting
aside the oldest queued report that is not an update's outcome (an "already up to date" or a slot
the agent could not reach us in: the control plane takes neither once its slot is long past),
or, when only outcomes are queued, the oldest outcome: the newest say what the host runs. `put`
returns it, for the log line; `agent status` names it with its reason. Queueing reads only the
newest `DUPLICATE_WINDOW` reports (a step run again finds the copy it queued before there; a
copy further back is harmless, the control plane takes a report twice as once), and counting
the queue reads no report.

A report set aside is named in `rejected/` by its own sequence there (the outbox's numbers start
again at 1 whenever it is empty, so the number a report had in the outbox is not unique over
time), with its `.reason` note beside it: the newest are the highest numbers, and the newest
`KEEP_REJECTED` are kept. `set_aside` lists them for `agent status`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from agent_daemon.connection.control_plane_client import Delivery
from agent_daemon.disk.atomic_file import read_versioned_json, write_versioned_json
from agent_daemon.errors import ControlPlaneUnreachable, DaemonStateError
from ground.contract import API_PREFIX
from ground.planted_files import open_regular
from ground.whole_numbers import whole_number

__all__ = [
    "DUPLICATE_WINDOW",
    "MAX_PENDING_REPORTS",
    "MAX_REASON_BYTES",
    "SENT_PER_FLUSH",
    "FlushResult",
    "Outbox",
    "Report",
    "SetAside",
    "SetAsideReports",
]

OUTBOX_FORMAT_VERSION = 1
AGENT_API = f"{API_PREFIX}/agent"
_REPORT_PATH = re.compile(re.escape(AGENT_API) + r"(?:/[A-Za-z0-9_-]+)+")
KEEP_REJECTED = 50
# At most this many reports wait: a week of the busiest schedule's slots the agent could not
# reach us in (7 x 288 = 2,016, each reported once it can) with room for the outcomes behind
# them. A report is about 1 KiB (an outcome's error of 2,000 characters at most), so a few MB.
MAX_PENDING_REPORTS = 3000
# At most this many reports are sent by one flush (one minute); a backlog goes out over the
# next minutes, in order, and no minute spends its slot's window on reports.
SENT_PER_FLUSH = 100
# How many of the newest queued reports a new one is compared with before it is queued.
DUPLICATE_WINDOW = 16
# The most a set-aside report's reason note holds: a refusal's detail is a few hundred bytes.
MAX_REASON_BYTES = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class Report:
    """One HTTP call to make later. `slot_key` and `run_id` are for the log line."""

    method: Literal["POST", "PATCH"]
    path: str
    body: dict[str, Any]
    slot_key: str | None = None
    run_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "body": self.body,
            "slot_key": self.slot_key,
            "run_id": self.run_id,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any], *, source: Path) -> Report:
        try:
            method = document["method"]
            if method not in {"POST", "PATCH"}:
                raise ValueError(f"method {method!r} is not POST or PATCH")
            path = document["path"]
            if not isinstance(path, str) or _REPORT_PATH.fullmatch(path) is None:
                # Sent with the agent's credential: never to another host or another API.
                raise ValueError(f"path {path!r} is not one of the agent's API ({AGENT_API}/…)")
            return cls(
                method=method,
                path=path,
                body=dict(document["body"]),
                slot_key=_text_or_none(document, "slot_key"),
                run_id=_text_or_none(document, "run_id"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DaemonStateError(f"{source}: not a usable outbox report ({exc})") from exc


def _text_or_none(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} {value!r} is not a string")
    return value


@dataclass(frozen=True, kw_only=True)
class SetAside:
    """One report in `rejected/`: when it was set aside (its note's time), the note as written
    (None: no readable note) and the report (None: it could not be read, `problem` says why)."""

    path: Path
    at: datetime
    why: dict[str, Any] | None
    report: Report | None
    problem: str | None = None


@dataclass(frozen=True, kw_only=True)
class SetAsideReports:
    """How many reports `rejected/` holds, and the newest of them, newest first."""

    directory: Path
    count: int
    newest: tuple[SetAside, ...]


@dataclass
class FlushResult:
    delivered: list[Report] = field(default_factory=list)
    rejected: list[tuple[Report, Delivery]] = field(default_factory=list)
    # Kept queued (`later`) and set aside by the sender (`given_up`), with the sender's words.
    waiting: list[tuple[Report, Delivery]] = field(default_factory=list)
    given_up: list[tuple[Report, Delivery]] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    # Reports to set aside that `rejected/` could not take (a full disk, a folder this user may
    # not write): left queued, tried again at the next flush, with the error.
    not_set_aside: list[tuple[Report | None, str]] = field(default_factory=list)
    offline: ControlPlaneUnreachable | None = None
    # The flush sent its `SENT_PER_FLUSH` and stopped: more reports wait for the next one.
    more: bool = False


class Outbox:
    def __init__(self, directory: Path, *, max_pending: int = MAX_PENDING_REPORTS) -> None:
        self.directory = directory
        self.rejected_directory = directory / "rejected"
        self.max_pending = max_pending

    def _files(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.glob("*.json") if _queued_name(p))

    def count(self) -> int:
        """How many reports wait, without reading one."""
        return len(self._files())

    def pending(self) -> list[Report]:
        return [report for _, report in self._pending_with_paths()]

    def _pending_with_paths(self) -> list[tuple[Path, Report]]:
        result = []
        for path in self._files():
            document = read_versioned_json(path, format_version=OUTBOX_FORMAT_VERSION)
            if document is not None:
                result.append((path, Report.from_json(document, source=path)))
        return result

    def put(self, report: Report) -> Report | None:
        """Queue `report` durably; the same report queued again by a step run again is kept once.
        At the bound, the report set aside to make room is returned (see the module)."""
        files = self._files()
        for path in files[-DUPLICATE_WINDOW:]:
            try:
                document = read_versioned_json(path, format_version=OUTBOX_FORMAT_VERSION)
            except DaemonStateError:
                continue
            if document is not None and document == report.as_json():
                return None
        sequence = int(files[-1].stem) + 1 if files else 1
        write_versioned_json(
            self.directory / f"{sequence:012d}.json",
            report.as_json(),
            format_version=OUTBOX_FORMAT_VERSION,
        )
        if len(files) < self.max_pending:
            return None
        try:
            return self._make_room(files)
        except OSError:
            # `rejected/` cannot take it now: the new report is queued all the same (one past
            # the bound) and the next report queued tries again.
            return None

    def _make_room(self, files: list[Path]) -> Report | None:
        """Set aside the oldest queued report that is not an outcome, else the oldest outcome."""
        oldest_outcome: tuple[Path, Report] | None = None
        for path in files:
            try:
                document = read_versioned_json(path, format_version=OUTBOX_FORMAT_VERSION)
                if document is None:
                    continue
                queued = Report.from_json(document, source=path)
            except DaemonStateError:
                continue  # set aside, with its log line, by the next flush
            if queued.method != "PATCH":
                return self._set_aside_full(path, queued, len(files))
            if oldest_outcome is None:
                oldest_outcome = (path, queued)
        if oldest_outcome is None:
            return None
        return self._set_aside_full(*oldest_outcome, len(files))

    def _set_aside_full(self, path: Path, queued: Report, waiting: int) -> Report:
        self._set_aside(
            path,
            {"outbox_full": f"the outbox was full ({waiting} reports waiting)"},
        )
        return queued

    def flush(self, deliver: Callable[[Report], Delivery]) -> FlushResult:
        """Send pending reports oldest first; stop (keeping order) at the first that must wait
        for the control plane, or once `SENT_PER_FLUSH` were sent (`more`); go on past one the
        sender keeps for later (not sent: status 0, it does not count)."""
        result = FlushResult()
        sent = 0
        for path in self._files():
            if sent >= SENT_PER_FLUSH:
                result.more = True
                return result
            try:
                document = read_versioned_json(path, format_version=OUTBOX_FORMAT_VERSION)
                if document is None:
                    continue
                report = Report.from_json(document, source=path)
            except DaemonStateError as exc:
                if self._try_set_aside(path, {"reason": str(exc)}, None, result):
                    result.unreadable.append((path, str(exc)))
                continue
            try:
                delivery = deliver(report)
            except ControlPlaneUnreachable as exc:
                result.offline = exc
                return result
            if delivery.status != 0:
                sent += 1
            if delivery.outcome == "delivered":
                path.unlink(missing_ok=True)
                result.delivered.append(report)
            elif delivery.outcome == "later":
                result.waiting.append((report, delivery))
            elif delivery.outcome == "given_up":
                if self._try_set_aside(path, {"given_up": delivery.detail}, report, result):
                    result.given_up.append((report, delivery))
            else:
                why = {"status": delivery.status, "detail": delivery.detail}
                if self._try_set_aside(path, why, report, result):
                    result.rejected.append((report, delivery))
        return result

    def _try_set_aside(
        self, path: Path, why: dict[str, Any], report: Report | None, result: FlushResult
    ) -> bool:
        """Set `path` aside; when `rejected/` cannot take it, leave it queued (noted in
        `result`) so the reports behind it and the rest of the minute go on."""
        try:
            self._set_aside(path, why)
        except OSError as exc:
            where = exc.filename or self.rejected_directory
            result.not_set_aside.append((report, f"{where}: {exc.strerror or exc}"))
            return False
        return True

    def _rejected_files(self) -> list[Path]:
        if not self.rejected_directory.is_dir():
            return []
        return sorted(p for p in self.rejected_directory.glob("*.json") if _queued_name(p))

    def _set_aside(self, path: Path, why: dict[str, Any]) -> None:
        self.rejected_directory.mkdir(parents=True, exist_ok=True)
        kept = self._rejected_files()
        target = self.rejected_directory / f"{int(kept[-1].stem) + 1 if kept else 1:012d}.json"
        note = target.with_suffix(".reason")
        # The note first: a report in `rejected/` always has its reason beside it.
        note.write_text(json.dumps(why) + "\n", encoding="utf-8")
        path.replace(target)
        for old in [*kept, target][:-KEEP_REJECTED]:
            old.unlink(missing_ok=True)
            old.with_suffix(".reason").unlink(missing_ok=True)

    def set_aside(self, *, newest: int) -> SetAsideReports:
        """The reports in `rejected/`: their number, and the `newest` of them read (newest
        first). Reads only; a file it cannot read is described, never an error."""
        files = self._rejected_files()
        return SetAsideReports(
            directory=self.rejected_directory,
            count=len(files),
            newest=tuple(
                _read_set_aside(path) for path in reversed(files[-newest:] if newest else [])
            ),
        )


def _queued_name(path: Path) -> bool:
    """A name the outbox gave (`000000000012.json`): any other file in its folder is not one of
    its reports, whatever `int` would make of its name."""
    return len(path.stem) == 12 and whole_number(path.stem) is not None


def _read_set_aside(path: Path) -> SetAside:
    note = path.with_suffix(".reason")
    why: dict[str, Any] | None = None
    try:
        # Root may read what the daemon's user wrote here (`status`): a link is not followed,
        # a pipe not waited on, a note past its bound not read, each taken as no reason.
        with open_regular(note, follow_links=False) as opened:
            stamp = os.fstat(opened.fileno()).st_mtime
            data = opened.read(MAX_REASON_BYTES + 1)
        if len(data) > MAX_REASON_BYTES:
            raise ValueError(f"{note}: more than {MAX_REASON_BYTES} bytes")
        document = json.loads(data)
        why = document if isinstance(document, dict) else None
    except (OSError, ValueError, RecursionError):
        try:
            stamp = path.stat().st_mtime
        except OSError:
            stamp = 0.0
    report: Report | None = None
    problem: str | None = None
    try:
        document = read_versioned_json(path, format_version=OUTBOX_FORMAT_VERSION)
        if document is None:
            problem = f"{path}: no longer there"
        else:
            report = Report.from_json(document, source=path)
    except DaemonStateError as exc:
        problem = str(exc)
    return SetAside(
        path=path,
        at=datetime.fromtimestamp(stamp, UTC),
        why=why,
        report=report,
        problem=problem,
    )
