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
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_daemon.connection.control_plane_client import Delivery
from agent_daemon.disk.atomic_file import read_versioned_json, write_versioned_json
from agent_daemon.errors import ControlPlaneUnreachable, DaemonStateError

__all__ = ["FlushResult", "Outbox", "Report"]

OUTBOX_FORMAT_VERSION = 1
KEEP_REJECTED = 50


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
            return cls(
                method=method,
                path=str(document["path"]),
                body=dict(document["body"]),
                slot_key=document.get("slot_key"),
                run_id=document.get("run_id"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DaemonStateError(f"{source}: not a usable outbox report ({exc})") from exc


@dataclass
class FlushResult:
    delivered: list[Report] = field(default_factory=list)
    rejected: list[tuple[Report, Delivery]] = field(default_factory=list)
    # Kept queued (`later`) and set aside by the sender (`given_up`), with the sender's words.
    waiting: list[tuple[Report, Delivery]] = field(default_factory=list)
    given_up: list[tuple[Report, Delivery]] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    offline: ControlPlaneUnreachable | None = None


class Outbox:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.rejected_directory = directory / "rejected"

    def _files(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.glob("*.json") if p.stem.isdigit())

    def pending(self) -> list[Report]:
        return [report for _, report in self._pending_with_paths()]

    def _pending_with_paths(self) -> list[tuple[Path, Report]]:
        result = []
        for path in self._files():
            document = read_versioned_json(path, format_version=OUTBOX_FORMAT_VERSION)
            if document is not None:
                result.append((path, Report.from_json(document, source=path)))
        return result

    def put(self, report: Report) -> None:
        """Queue `report` durably; the same report queued twice (a step run again) is kept once."""
        files = self._files()
        for path in files:
            try:
                document = read_versioned_json(path, format_version=OUTBOX_FORMAT_VERSION)
            except DaemonStateError:
                continue
            if document is not None and document == report.as_json():
                return
        sequence = int(files[-1].stem) + 1 if files else 1
        write_versioned_json(
            self.directory / f"{sequence:012d}.json",
            report.as_json(),
            format_version=OUTBOX_FORMAT_VERSION,
        )

    def flush(self, deliver: Callable[[Report], Delivery]) -> FlushResult:
        """Send pending reports oldest first; stop (keeping order) at the first that must wait
        for the control plane; go on past one the sender keeps for later."""
        result = FlushResult()
        for path in self._files():
            try:
                document = read_versioned_json(path, format_version=OUTBOX_FORMAT_VERSION)
                if document is None:
                    continue
                report = Report.from_json(document, source=path)
            except DaemonStateError as exc:
                self._set_aside(path, {"reason": str(exc)})
                result.unreadable.append((path, str(exc)))
                continue
            try:
                delivery = deliver(report)
            except ControlPlaneUnreachable as exc:
                result.offline = exc
                return result
            if delivery.outcome == "delivered":
                path.unlink(missing_ok=True)
                result.delivered.append(report)
            elif delivery.outcome == "later":
                result.waiting.append((report, delivery))
            elif delivery.outcome == "given_up":
                self._set_aside(path, {"given_up": delivery.detail})
                result.given_up.append((report, delivery))
            else:
                self._set_aside(path, {"status": delivery.status, "detail": delivery.detail})
                result.rejected.append((report, delivery))
        return result

    def _set_aside(self, path: Path, why: dict[str, Any]) -> None:
        self.rejected_directory.mkdir(parents=True, exist_ok=True)
        note = path.with_suffix(".reason")
        note.write_text(json.dumps(why) + "\n", encoding="utf-8")
        path.replace(self.rejected_directory / path.name)
        note.replace(self.rejected_directory / note.name)
        kept = sorted(self.rejected_directory.glob("*.json"))
        for old in kept[:-KEEP_REJECTED]:
            old.unlink(missing_ok=True)
            old.with_suffix(".reason").unlink(missing_ok=True)
