"""The end of the demo: caps held, one agent's night as it saw it and as the control plane recorded
it, the notifications each organisation received, and where to look next."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from agent_daemon.host.event_log import parse_line
from ground.instants import parse_instant
from nachtwacht.demo_night.night import Night
from nachtwacht.demo_night.platform import OrgAccount
from nachtwacht.demo_night.progress import Snapshot
from nachtwacht.demo_night.simulated import JournalEntry
from nachtwacht.demo_world.supervisor import START_AFTER_EXIT, START_REQUESTED_AFTER_FIRST

__all__ = [
    "TimelineEntry",
    "caps_lines",
    "control_plane_timeline",
    "daemon_timeline",
    "notification_lines",
    "timeline_lines",
]

# Daemon events that repeat every minute without saying anything new about the night.
_QUIET_EVENTS = {"report.delivered"}
_DETAIL_FIELDS = (
    "slot_key",
    "code",
    "version",
    "status",
    "retry_after_seconds",
    "step",
    "percent",
    "waited_seconds",
    "error",
)
REQUEST_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    event: str
    detail: str


def _parse_instant(text: str) -> datetime:
    return parse_instant(text, field="server_time")


def daemon_timeline(log: Path, night: Night) -> list[TimelineEntry]:
    """The JSON event lines a real daemon wrote during the night."""
    entries = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            event = parse_line(line)
            at = _parse_instant(str(event["server_time"]))
        except (ValueError, KeyError, TypeError):
            continue
        if not (night.start <= at <= night.end) or event.get("event") in _QUIET_EVENTS:
            continue
        detail = ", ".join(
            f"{name} {event[name]}" for name in _DETAIL_FIELDS if event.get(name) is not None
        )
        entries.append(TimelineEntry(at, str(event.get("event")), detail))
    return entries


def journal_timeline(journal: Iterable[JournalEntry]) -> list[TimelineEntry]:
    return [TimelineEntry(entry.at, entry.event, entry.detail) for entry in journal]


def _collapse(entries: list[TimelineEntry]) -> list[tuple[TimelineEntry, int]]:
    """Runs of the same event (a refusal every minute) become one line with a count."""
    collapsed: list[tuple[TimelineEntry, int]] = []
    for entry in entries:
        if collapsed and collapsed[-1][0].event == entry.event and entry.event.startswith("claim."):
            first, count = collapsed[-1]
            collapsed[-1] = (first, count + 1)
        else:
            collapsed.append((entry, 1))
    return collapsed


def timeline_lines(entries: list[TimelineEntry], night: Night) -> list[str]:
    lines = []
    for entry, count in _collapse(entries):
        shown = entry.at.astimezone(ZoneInfo(night.timezone))
        stamp = f"{shown:%H:%M:%S} {shown.tzname()}"
        repeat = f"  (x{count}, once a minute)" if count > 1 else ""
        lines.append(f"  {stamp}  {entry.event:<22} {entry.detail}{repeat}")
    return lines


def _get(base_url: str, path: str, key: str) -> httpx.Response | None:
    try:
        return httpx.get(
            base_url + path,
            headers={"Authorization": f"Bearer {key}"},
            timeout=REQUEST_TIMEOUT_SECONDS,
        )
    except httpx.HTTPError:
        return None


def _items(body: Any, name: str) -> list[dict[str, Any]]:
    if isinstance(body, dict):
        body = body.get(name, [])
    return [item for item in body if isinstance(item, dict)] if isinstance(body, list) else []


def control_plane_timeline(
    base_url: str, org: OrgAccount, agent_id: str, night: Night
) -> list[str]:
    """The agent's events as the panel shows them (`GET /v1/agents/{id}/events`)."""
    answer = _get(base_url, f"/v1/agents/{agent_id}/events", org.panel_key)
    if answer is None or answer.status_code != 200:
        status = "no answer" if answer is None else f"HTTP {answer.status_code}"
        return [f"  (GET /v1/agents/{agent_id}/events: {status})"]
    lines = []
    for event in sorted(_items(answer.json(), "events"), key=lambda e: str(e.get("at"))):
        at = event.get("at")
        when = night.label(_parse_instant(at)) if isinstance(at, str) else "?"
        actor = event.get("actor_kind") or (event.get("actor") or {}).get("kind", "")
        data = event.get("data") or {}
        summary = ", ".join(f"{k} {v}" for k, v in data.items() if v is not None)
        lines.append(f"  {when}  {event.get('kind', '?'):<22} by {actor or '?':<9} {summary}")
    return lines or ["  (no events)"]


def notification_lines(base_url: str, orgs: list[OrgAccount], night: Night) -> list[str]:
    lines = []
    for org in orgs:
        answer = _get(base_url, "/v1/notifications", org.panel_key)
        if answer is None:
            lines.append(f"  {org.name}: the control plane did not answer")
            continue
        if answer.status_code == 404:
            return [
                "  this control plane has no notification inbox yet (GET /v1/notifications "
                "answered 404): the reconcile worker and its notifications are missing"
            ]
        if answer.status_code != 200:
            lines.append(f"  {org.name}: GET /v1/notifications answered {answer.status_code}")
            continue
        items = _items(answer.json(), "notifications")
        lines.append(f"  {org.name}: {len(items)} notification(s)")
        for item in items:
            at = item.get("created_at") or item.get("at")
            when = night.label(_parse_instant(at)) if isinstance(at, str) else ""
            text = item.get("summary") or item.get("title") or item.get("message") or item
            lines.append(f"    {when}  {text}")
    if lines and all(line.endswith(": 0 notification(s)") for line in lines):
        lines.append(
            "  (none: the reconcile worker writes one per organisation once the slot's window has "
            "closed — this control plane's worker did not, or has not yet)"
        )
    return lines


def caps_lines(snapshot: Snapshot, caps: tuple[int, int]) -> list[str]:
    org_cap, global_cap = caps
    most = snapshot.max_grants()
    lines = [
        f"  most tokens in one round: {most} of the global cap {global_cap}"
        + (" — held" if most <= global_cap else " — EXCEEDED"),
    ]
    for org in snapshot.orgs:
        top = snapshot.max_org_grants(org.name)
        rounds = sum(1 for _, n in snapshot.org_grants_per_round.get(org.name, []) if n)
        verdict = "held" if top <= org_cap else "EXCEEDED"
        lines.append(
            f"  {org.name}: at most {top} per round (cap {org_cap}, {verdict}), "
            f"tokens spread over {rounds} round(s)"
        )
    return lines


def service_start_lines(setup: Counter[str], total: Counter[str], *, hosts: int) -> list[str]:
    """Every start of the agent services, explained: set-up (installing 1.0.0) and the night.

    A first start comes when `current` first exists; the installer's restart command restarts a
    service the supervisor had already started from the just-switched `current` (it polls, like
    systemd's Restart=always would) — or starts it, when the request came first. Tonight each
    update restarts its service once, and a rollback once more. A service that exited on its own
    is a defect until shown otherwise, so its exit codes are named."""
    night = total - setup
    lines = [f"agent services: started {sum(total.values())} times for {hosts} hosts"]
    for phase, counts in (("set-up (installing 1.0.0)", setup), ("tonight", night)):
        if not counts:
            continue
        parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
        lines.append(f"  {phase}: {parts}")
    raced = total.get(START_REQUESTED_AFTER_FIRST, 0)
    if raced:
        lines.append(
            f"  ({raced} restart(s) just after a first start: the supervisor, which polls like "
            "systemd's Restart=always, had started the service from the `current` the installer "
            "had just switched, before the installer's restart request arrived)"
        )
    exits = sum(n for reason, n in total.items() if reason.startswith(START_AFTER_EXIT))
    if exits:
        lines.append(f"  {exits} start(s) after a service exited on its own: a defect to look into")
    return lines
