"""The forecast as a table for a terminal (`nachtwacht control forecast --date …`)."""

from __future__ import annotations

from control_plane.forecast.model import PlatformDayForecast, WaveOutlook

__all__ = ["render_forecast", "render_outlook"]


def render_outlook(outlook: WaveOutlook) -> str:
    """What publishing a release does next, in one or two lines."""
    who = f"{outlook.share_percent} % of the agents"
    if outlook.canaries:
        who = f"the marked canaries and {who}"
    if outlook.stage == "everyone":
        where = f"stage everyone (wave {outlook.wave} of {outlook.waves}): every agent"
    else:
        where = f"stage canary, wave {outlook.wave} of {outlook.waves}: {who}"
    if outlook.first_slot_local_time is None:
        until = outlook.until.isoformat(timespec="seconds")
        return f"{where}; no agent of this wave has a slot before {until}"
    reached = "1 agent" if outlook.agents == 1 else f"{outlook.agents} agents"
    lines = [f"{where}; {reached} reached at their next slot, from {outlook.first_slot_local_time}"]
    if outlook.will_miss:
        lines.append(f"the caps serve {outlook.can_update}: {outlook.will_miss} will miss it")
    return "\n".join(lines)


def render_forecast(view: PlatformDayForecast) -> str:
    """One line per slot instant: agents, organisations, capacity in the window, misses."""
    lines = [
        f"forecast for {view.date.isoformat()} ({view.timezone}; window"
        f" {view.catch_up_minutes} min, caps {view.org_cap} per organisation and"
        f" {view.global_cap} in total per minute)"
    ]
    if not view.slots:
        lines.append("no enabled agent has a slot on this day")
        return "\n".join(lines)
    header = ("slot", "local time", "agents", "orgs", "capacity", "per org", "will miss")
    rows = [
        (
            slot.key[11:],
            slot.local_time[11:],
            str(slot.agents),
            str(slot.organisations),
            str(slot.capacity),
            str(slot.org_capacity),
            str(slot.will_miss),
        )
        for slot in view.slots
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [
            cell.ljust(width) if i < 2 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    total = sum(slot.will_miss for slot in view.slots)
    overlapping = [slot.key[11:] for slot in view.slots if slot.overlaps]
    lines.append(f"{total} agents will miss their window if all need an update")
    if overlapping:
        lines.append(
            "windows overlap at " + ", ".join(overlapping) + ": those slots share rounds,"
            " so their figures are optimistic"
        )
    return "\n".join(lines)
