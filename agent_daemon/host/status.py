"""`nachtwacht agent status`: what a person on the host wants to know, from the files on disk.

It reads, never writes, and contacts nothing: the trust root held (its version and expiry, named
under "attention" within 30 days of it), the cached config (schedule, zone, release and why it is
not the newest, brake, hold, a requested update not yet taken up, when it was synced), the
daemon's state file (last runs, the update in progress), its activity file (what it is doing,
since when the control plane is unreachable or refuses the agent's credential, the last refusal),
the outbox, and the daemon's lock (is it running). It works while the daemon runs, while it is
stopped, and while the host is offline. What is wrong comes first, in words (`problems`).

Whether the daemon runs is its lock, not a heartbeat: the kernel lets go of a `flock` the moment
its holder dies (even by SIGKILL), so the answer is exact at once, a reused pid cannot fool it, and
an idle daemon writes nothing each minute; a heartbeat would need both a write every minute and a
guess of how old is too old.

Every time is shown in one zone, the platform's (the schedule's and the panel's, from the cached
config; UTC before the first sync), and always with its zone: `2026-11-30 03:00 CET`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from agent_daemon.connection.config_cache import CachedConfig
from agent_daemon.connection.outbox import MAX_PENDING_REPORTS, SetAside, SetAsideReports
from agent_daemon.connection.server_clock import beyond_bound
from agent_daemon.disk.daemon_state import DaemonState, RunRecord
from agent_daemon.disk.held_trust_root import HeldTrustRoot
from agent_daemon.disk.unreachable_file import UnreachableSlot
from agent_daemon.host.activity import ActivityRecord
from agent_daemon.host.status_times import ago, days_until, describe_slot, until, zoned
from ground.contract import (
    RUNS_PATH,
    UNREACHABLE_PATH,
    ManualUpdateView,
    MissReason,
    OfferNote,
    OutcomeReason,
    RefusalCode,
    ReleaseTrack,
)
from ground.contract.plain_text import clipped, shown
from ground.contract.wording import (
    MISS_REASON_WORDS,
    OFFER_REASON_WORDS,
    OUTCOME_REASON_WORDS,
    SKIP_REASON_WORDS,
)
from ground.limits import MAX_UNREACHABLE_REPORT_AGE_DAYS
from shared_planner import next_slot

__all__ = [
    "REASON_WORDS",
    "SET_ASIDE_SHOWN",
    "TRUST_ROOT_WARNING",
    "AgentStatus",
    "describe_offer_note",
    "describe_reason",
    "describe_run",
    "describe_set_aside",
    "describe_slot",
    "describe_trust_root",
    "pending_update_now",
    "problems",
    "render_status",
]

_OUTCOME_WORDS: dict[str, str] = {
    "up_to_date": "already up to date",
    "succeeded": "updated",
    "failed": "update failed",
    "rolled_back": "update failed and was rolled back",
    RefusalCode.SLOT_CONSUMED: "already handled (control plane)",
    RefusalCode.WINDOW_CLOSED: "too late in its window for an update",
    RefusalCode.NOT_A_SLOT: "not a slot on the control plane's schedule",
    # Slots given up on the control plane's word (`claim.slot_gone`): consumed, nothing claimed.
    RefusalCode.HELD: f"skipped: {SKIP_REASON_WORDS[RefusalCode.HELD]}",
    RefusalCode.RELEASE_ROLLED_BACK: "skipped: "
    + SKIP_REASON_WORDS[RefusalCode.RELEASE_ROLLED_BACK],
    RefusalCode.RELEASE_HALTED: f"skipped: {SKIP_REASON_WORDS[RefusalCode.RELEASE_HALTED]}",
}

# How many of the reports set aside `status` describes, newest first (it counts them all).
SET_ASIDE_SHOWN = 3

# A trust root this close to its expiry is named under "attention": its successor is due.
TRUST_ROOT_WARNING = timedelta(days=30)

# Less room than this on the state directory's file system is named under "attention": the
# daemon's state file alone can take tens of kB (its last runs with their errors, a claim with its
# signed manifest), so a write there may fail at any moment.
STATE_DIR_FULL_BELOW = 64 * 1024

# Why a claimed run ended as it did, in the words the panel says too.
REASON_WORDS = OUTCOME_REASON_WORDS
# The outcomes worth a line under "attention".
_FAILED = frozenset({"failed", "rolled_back"})


@dataclass(frozen=True, kw_only=True)
class AgentStatus:
    agent_id: str
    control_url: str
    daemon_pid: int | None
    cached: CachedConfig | None
    state: DaemonState
    pending_reports: int
    installed_version: str | None
    now: datetime  # server time as this host estimates it
    updater_step: str | None = None  # e.g. "switched: 1.5.0 (run …)" from the updater's state
    activity: ActivityRecord | None = None  # the running (or last) daemon's activity file
    track: ReleaseTrack | None = None  # the (channel, platform) this agent follows
    # The trust root held (None: the trusted-key files are trusted), or why its file is unusable.
    trust_root: HeldTrustRoot | None = None
    trust_root_error: str | None = None
    # The slots whose window the daemon was inside while it could not reach the control plane,
    # not yet told to it (`minute.unreachable_slots`).
    unreachable_slots: tuple[UnreachableSlot, ...] = ()
    # The slots whose report of that is in the outbox, waiting for a control plane that takes it
    # (`minute.reporting`: a replica of an older release has no route for it).
    unreachable_reports_waiting: tuple[str, ...] = ()
    # The reports the outbox set aside in `rejected/`: refused for good, given up or unreadable,
    # never sent again (None: the directory could not be read).
    set_aside: SetAsideReports | None = None
    # The daemon's files status could not read (the cached config, the state), one sentence each.
    unreadable_files: tuple[str, ...] = ()
    # The state directory and the room left on its file system (None: not known).
    state_dir: Path | None = None
    state_dir_free_bytes: int | None = None

    @property
    def zone(self) -> ZoneInfo | None:
        """The platform's zone, every time of `status` is shown in (None before the first
        sync: then UTC)."""
        return None if self.cached is None else ZoneInfo(self.cached.config.timezone)


def describe_trust_root(status: AgentStatus) -> str:
    """`v3, expires 2027-03-01 01:00 CET (in 88 days)`, or `none (trusted-key files)`."""
    if status.trust_root_error is not None:
        return f"unusable ({status.trust_root_error})"
    root = status.trust_root
    if root is None:
        return "none (trusted-key files)"
    when = zoned(root.expires, status.zone)
    if root.is_expired(status.now):
        return f"v{root.version}, EXPIRED at {when} ({ago(root.expires, status.now)})"
    return f"v{root.version}, expires {when} (in {days_until(root.expires - status.now)})"


def _trust_root_problems(status: AgentStatus) -> list[str]:
    if status.trust_root_error is not None:
        return [
            f"the held trust root is unusable: {status.trust_root_error}; no release is accepted "
            "until it is replaced (`nachtwacht agent enroll --force --trust-root FILE`)"
        ]
    root = status.trust_root
    if root is None:
        return []
    when = zoned(root.expires, status.zone)
    if root.is_expired(status.now):
        return [
            f"the trust root v{root.version} expired at {when}: no release is accepted until "
            "the operators publish a newer trust root"
        ]
    if root.expires - status.now <= TRUST_ROOT_WARNING:
        return [
            f"the trust root v{root.version} expires at {when} (in "
            f"{days_until(root.expires - status.now)}): after that no release is accepted "
            "until the operators publish a newer trust root"
        ]
    return []


def describe_reason(reason: str) -> str:
    """The words for an `OutcomeReason`; a reason this agent does not know is named as it is."""
    try:
        return REASON_WORDS[OutcomeReason(reason)]
    except ValueError:
        return f"reason {reason!r}"


def describe_offer_note(note: OfferNote | None, installed_version: str | None) -> str | None:
    """Why this agent is not updated to its pair's newest release: `not updated to 1.6.0: pinned
    to another version by our operators`, the person's words in brackets; None when nothing
    stands in the way or it runs the newest already. A reason this agent does not know is named
    as it is."""
    if note is None or (note.newest_version and note.newest_version == installed_version):
        return None
    known = note.known_reason
    words = OFFER_REASON_WORDS[known] if known is not None else f"reason {note.reason!r}"
    detail = f" ({note.detail})" if note.detail else ""
    return f"not updated to {note.newest_version or 'the newest release'}: {words}{detail}"


def describe_run(record: RunRecord, tz: ZoneInfo | None) -> str:
    """`2026-11-30 03:00 CET — already up to date (1.4.1)`; a run that ended with a reason says
    it: `… — update failed (1.4.1), because the download kept failing …: <error> [run …]`."""
    if record.slot_key is not None:
        when = describe_slot(record.slot_key, tz)
    else:
        when = f"{zoned(record.at, tz)} (manual)"
    words = _OUTCOME_WORDS.get(record.status, record.status)
    if record.status == "succeeded" and record.version:
        words = f"updated to {record.version}"
    elif record.version and record.status != "succeeded":
        words = f"{words} ({record.version})"
    if record.reason is not None:
        words = f"{words}, because {describe_reason(record.reason)}"
    if record.error and record.status not in {"up_to_date"}:
        words = f"{words}: {record.error}"
    if record.run_id:
        words = f"{words} [run {record.run_id}]"
    return f"{when} — {words}"


def problems(status: AgentStatus) -> list[str]:
    """What is wrong, one sentence each: what a person on the host should look at first."""
    return [
        *status.unreadable_files,
        *_disk_problems(status),
        *_daemon_problems(status),
        *_connection_problems(status),
        *_trust_root_problems(status),
        *_last_run_problems(status.state, status.zone),
        *_config_problems(status),
    ]


def _disk_problems(status: AgentStatus) -> list[str]:
    """A state directory with no room: the daemon writes none of its files, the activity file
    this status reads included, so what it shows of the daemon may be old."""
    free = status.state_dir_free_bytes
    if free is None or free >= STATE_DIR_FULL_BELOW:
        return []
    return [
        f"the disk of the state directory {status.state_dir} is full ({free} bytes free): the "
        "daemon cannot save its state or its reports there — a granted update is not started "
        "until its claim is saved (then it ends failed, disk_full), reports wait in the "
        "daemon's memory (lost if it stops), and what status shows of the daemon may be old; "
        "free space there"
    ]


def _connection_problems(status: AgentStatus) -> list[str]:
    """The way to the control plane: unreachable, unavailable, or a refusal on record."""
    found: list[str] = []
    tz = status.zone
    activity = status.activity
    if activity is not None and activity.unreachable_since is not None:
        since = activity.unreachable_since
        found.append(
            f"control plane unreachable since {zoned(since, tz)} ({ago(since, status.now)}): "
            f"{activity.unreachable_error or 'no answer'}"
        )
    for noted in status.unreachable_slots:
        tried = (
            f"1 try, at {zoned(noted.first_tried_at, tz)}"
            if noted.attempts == 1
            else f"{noted.attempts} tries, {zoned(noted.first_tried_at, tz)} to "
            f"{zoned(noted.last_tried_at, tz)}"
        )
        found.append(
            f"{describe_slot(noted.slot_key, tz)}: the agent was running but could not reach the "
            f"control plane in its window ({tried}): {shown(noted.error)}"
            " — check this host's proxy, firewall and DNS, or the control plane's status page;"
            " once it is reached again the control plane is told, and records the miss as"
            f" unreachable ({MISS_REASON_WORDS[MissReason.UNREACHABLE]}) instead of offline"
        )
    for slot_key in status.unreachable_reports_waiting:
        found.append(
            f"{describe_slot(slot_key, tz)}: the agent could not reach the control plane in its "
            "window, and the report saying so waits in the outbox for a control plane that takes "
            "it (one of an older release does not): it is sent again each minute, for up to "
            f"{MAX_UNREACHABLE_REPORT_AGE_DAYS} days after the slot; until then the miss reads"
            " offline"
        )
    found.extend(_set_aside_problems(status))
    if activity is not None and activity.platform_unavailable_since is not None:
        since = activity.platform_unavailable_since
        found.append(
            f"the control plane is unavailable since {zoned(since, tz)} "
            f"({ago(since, status.now)}): it answers, but cannot serve "
            f"({activity.platform_unavailable_error or 'no reason given'}) — an outage on the "
            "platform's side, not this host's network; updates are tried again inside their window"
        )
    if activity is not None and activity.config_unusable_since is not None:
        since = activity.config_unusable_since
        found.append(
            f"the config poll's answer cannot be used since {zoned(since, tz)} "
            f"({ago(since, status.now)}): {activity.config_unusable_error or 'not a config'} — "
            "no slot is claimed and nothing is consumed until a config comes again (the "
            "reports wait); check what answers at the control URL (JSON that is no config of "
            "this agent's contract, an answer cut short on the way)"
        )
    if activity is not None and activity.last_refusal is not None:
        refusal = activity.last_refusal
        about = (
            describe_slot(refusal.slot_key, tz)
            if refusal.slot_key
            else f"run {refusal.run_id}"
            if refusal.run_id
            else "a claim"
        )
        found.append(
            f"last refusal {zoned(refusal.at, tz)} ({ago(refusal.at, status.now)}), for "
            f"{about}: {refusal.code} — {refusal.message}"
        )
    return found


def _set_aside_problems(status: AgentStatus) -> list[str]:
    """The reports set aside: what the control plane never recorded, one line for all of them
    and one for each of the newest."""
    held = status.set_aside
    if held is None or held.count == 0:
        return []
    newest = (
        "it is"
        if held.count == 1
        else f"the newest {len(held.newest)} are"
        if held.count > len(held.newest)
        else "they are"
    )
    reports = (
        "1 report to the control plane was set aside and is"
        if held.count == 1
        else f"{held.count} reports to the control plane were set aside and are"
    )
    found = [
        f"{reports} never sent again ({newest} "
        f"below; each file in {held.directory} has its reason beside it in a .reason file): the "
        "control plane has no record of what they say — read the reasons, fix what they name, "
        f"then remove the files (rm {held.directory}/*) to clear this"
    ]
    found.extend(describe_set_aside(item, status.zone, status.now) for item in held.newest)
    return found


def describe_set_aside(item: SetAside, tz: ZoneInfo | None, now: datetime) -> str:
    """`set aside 2026-11-30 03:20 CET (5 minutes ago): the outcome of run 5f0e… (failed) for
    2026-11-30 03:00 CET — the control plane refused it (409: …) [000000000003.json]`."""
    return (
        f"set aside {zoned(item.at, tz)} ({ago(item.at, now)}): {_set_aside_what(item, tz)} — "
        f"{_set_aside_why(item)} [{item.path.name}]"
    )


def _set_aside_what(item: SetAside, tz: ZoneInfo | None) -> str:
    report = item.report
    if report is None:
        return f"a report that cannot be read ({shown(item.problem or 'unknown')})"
    slot = "" if report.slot_key is None else f" for {describe_slot(report.slot_key, tz)}"
    if report.path == UNREACHABLE_PATH:
        return f"the report that this host could not reach the control plane in the window{slot}"
    if report.method == "POST" and report.path == RUNS_PATH:
        return f'the report "already up to date"{slot}'
    if report.run_id is not None:
        status = report.body.get("status")
        ended = f" ({shown(status)})" if isinstance(status, str) else ""
        return f"the outcome{ended} of run {shown(report.run_id)}{slot or ' (manual)'}"
    return f"the report {report.method} {shown(report.path)}{slot}"


def _set_aside_why(item: SetAside) -> str:
    """The note's reason in words: the control plane's refusal, the agent giving up, or a file
    that could not be read."""
    why = item.why
    if why is None:
        return "no reason was recorded beside it"
    status, detail = why.get("status"), why.get("detail")
    given_up, unreadable = why.get("given_up"), why.get("reason")
    full = why.get("outbox_full")
    if isinstance(status, int) and not isinstance(status, bool):
        said = f": {shown(clipped(detail, 300))}" if isinstance(detail, str) and detail else ""
        return f"the control plane refused it for good ({status}{said})"
    if isinstance(given_up, str):
        return f"the agent gave up on it: {shown(clipped(given_up, 400))}"
    if isinstance(full, str):
        return (
            f"{shown(clipped(full, 200))}: it was the oldest, set aside to make room for a newer "
            "report (the control plane was not reached for a long time)"
        )
    if isinstance(unreadable, str):
        return f"it could not be read, so it was never sent: {shown(clipped(unreadable, 300))}"
    return f"its reason is not one this agent knows ({shown(clipped(str(why), 200))})"


def _config_problems(status: AgentStatus) -> list[str]:
    """What the configuration the agent last fetched says: its clock, a hold, the brake, a release
    for another channel or platform."""
    found: list[str] = []
    cached = status.cached
    tz = status.zone
    if cached is None:
        return found
    activity = status.activity
    jumped = activity is not None and activity.clock_off_seconds is not None
    if jumped or beyond_bound(timedelta(seconds=cached.offset_seconds)):
        found.append(
            "this host's clock is more than a day off the control plane's (measured by the last"
            " answer, or by the time elapsed since it; the offset is kept at the 24-hour bound):"
            " on it every slot would be another day's, so none is claimed"
            " until the clock is right, and the control plane records each night's as missed"
            " (host_clock: " + MISS_REASON_WORDS[MissReason.HOST_CLOCK] + ") — set the host's"
            " clock right"
            " (NTP); the daemon's log says clock.disagrees with the offset it measured"
        )
    config = cached.config
    hold = config.hold
    if hold is not None and hold.until > status.now:
        reason = f" ({hold.reason})" if hold.reason else ""
        found.append(
            f"held until {zoned(hold.until, tz)}{reason}, set by the {hold.set_by}: scheduled "
            "slots until then are skipped"
        )
    if config.brake.engaged:
        found.append(
            f"the operators' brake is engaged ({config.brake.reason or 'no reason given'}): "
            "no scheduled update is granted"
        )
    release, track = config.release, status.track
    if release is not None and track is not None:
        other = [
            f"{name} {offered!r}"
            for name, offered, own in (
                ("channel", release.channel, track.channel),
                ("platform", release.platform, track.platform),
            )
            if offered is not None and offered != own
        ]
        if other:
            found.append(
                f"the offered release {release.version} is for {' and '.join(other)}, not this "
                f"agent's (channel {track.channel!r}, platform {track.platform!r}): check "
                "`channel` and `platform` in agent.toml"
            )
    return found


def _daemon_problems(status: AgentStatus) -> list[str]:
    """A credential the control plane refuses, and a daemon that does not run: with either,
    nothing is updated at all, so they come first."""
    found: list[str] = []
    tz, activity = status.zone, status.activity
    if activity is not None and activity.credential_refused_since is not None:
        since = activity.credential_refused_since
        found.append(
            f"the control plane refuses this agent's credential since {zoned(since, tz)} "
            f"({ago(since, status.now)}): {activity.credential_refused_error or 'refused'} — it "
            "was revoked or replaced; nothing is updated until the agent is enrolled again"
        )
    if status.daemon_pid is None:
        pending = pending_update_now(status)
        waiting = (
            ""
            if pending is None
            else f"; the update requested {_requested_when(pending, tz)} waits for it"
        )
        last = ""
        if activity is not None and activity.updated_at is not None:
            last = f" (last seen {ago(activity.updated_at, status.now)}: {activity.doing})"
        found.append(
            f"the daemon is not running{last}: nothing is updated until it runs again "
            f"(systemctl start nachtwacht-agent; why it stopped: journalctl -u nachtwacht-agent "
            f"-p warning){waiting}"
        )
    return found


def pending_update_now(status: AgentStatus) -> ManualUpdateView | None:
    """The update requested now (`agent update-now`, or in the panel) that the daemon has not
    taken up yet, as of the last config it synced; None when there is none."""
    cached = status.cached
    manual = None if cached is None else cached.config.manual_update
    if manual is None:
        return None
    run_id = str(manual.run_id)
    state = status.state
    taken = (
        run_id in state.handled_manual_runs
        or (state.claim is not None and state.claim.run_id == run_id)
        or any(record.run_id == run_id for record in state.recent_runs)
    )
    return None if taken else manual


def _requested_when(manual: ManualUpdateView, tz: ZoneInfo | None) -> str:
    at = "" if manual.requested_at is None else f"at {zoned(manual.requested_at, tz)} "
    return f"{at}(run {manual.run_id})"


def _last_run_problems(state: DaemonState, tz: ZoneInfo | None) -> list[str]:
    """The update in progress that is waiting out a failure, and the last run when it failed."""
    found: list[str] = []
    claim = state.claim
    if claim is not None and claim.last_reason is not None:
        target = describe_slot(claim.slot_key, tz) if claim.slot_key else "a manual request"
        found.append(
            f"the update to {claim.release_version} for {target} is waiting: "
            f"{_RETRY_WORDS[claim.last_reason]}; tried again next minute while its window is open"
        )
    if state.recent_runs and state.recent_runs[-1].status in _FAILED:
        found.append(f"the last run did not update: {describe_run(state.recent_runs[-1], tz)}")
    return found


# Why an update in progress is waiting (`ClaimInProgress.last_reason`), in the present tense.
_RETRY_WORDS: dict[OutcomeReason, str] = {
    OutcomeReason.PLATFORM_UNAVAILABLE: "the control plane is unavailable (an outage on the "
    "platform's side, not this host's network)",
    OutcomeReason.INTERRUPTED: "it was interrupted",
    OutcomeReason.TOKEN_REVOKED: "its token was revoked",
    OutcomeReason.TOKEN_EXPIRED: "its token expired",
    OutcomeReason.DISK_FULL: "the disk is full",
    OutcomeReason.DOWNLOAD_FAILED: "the download was cut and resumes where it stopped",
    OutcomeReason.VERIFICATION_FAILED: "the build was refused by verification",
    OutcomeReason.INSTALL_FAILED: "installing the build failed",
    OutcomeReason.HEALTH_CHECK_FAILED: "the new version was not healthy",
}


def render_status(status: AgentStatus) -> str:
    lines = [f"agent:         {status.agent_id} at {status.control_url}"]
    wrong = problems(status)
    if wrong:
        lines.append("attention:")
        lines.extend(f"  ! {sentence}" for sentence in wrong)
    if status.daemon_pid is None:
        lines.append("daemon:        not running")
    elif status.daemon_pid < 0:
        lines.append("daemon:        running")
    else:
        lines.append(f"daemon:        running (pid {status.daemon_pid})")
    if status.daemon_pid is not None and status.activity is not None:
        lines.append(f"doing:         {status.activity.doing}")
    lines.append(f"installed:     {status.installed_version or 'nothing installed yet'}")
    lines.append(f"trust root:    {describe_trust_root(status)}")
    cached = status.cached
    tz = status.zone
    if cached is None:
        lines.append(
            "config:        never synced (the daemon has not reached the control plane yet)"
        )
    else:
        config = cached.config
        synced = f"{zoned(cached.synced_at, tz)} ({ago(cached.synced_at, status.now)})"
        lines.append(f"config synced: {synced}")
        offset = round(cached.offset_seconds)
        lines.append(f"clock offset:  {offset:+d} s (the control plane's clock)")
        if config.schedule.enabled:
            times = ", ".join(config.schedule.times)
            lines.append(
                f"schedule:      on, {times} ({config.timezone}); "
                f"catch-up window {config.catch_up_minutes} minutes"
            )
            upcoming = next_slot(config.schedule.times, after=status.now, tz=config.timezone)
            lines.append(
                f"next slot:     {zoned(upcoming.at, tz)} (in {until(upcoming.at - status.now)})"
            )
        else:
            lines.append("schedule:      off (updates only when requested in the panel)")
        track = config.track
        if track is not None:
            lines.append(f"follows:       channel {track.channel}, platform {track.platform}")
        release = config.release
        lines.append(f"release:       {release.version if release else 'none published'}")
        why = describe_offer_note(config.offer_note, status.installed_version)
        if why is not None:
            lines.append(f"newest:        {why}")
        brake = config.brake
        brake_text = f"ENGAGED ({brake.reason or 'no reason given'})" if brake.engaged else "off"
        lines.append(f"brake:         {brake_text}")
    pending = pending_update_now(status)
    if pending is not None:
        who = "the daemon's next minute" if status.daemon_pid is not None else "the daemon"
        lines.append(
            f"update-now:    requested {_requested_when(pending, tz)}, not started yet: it "
            f"waits for {who}"
        )
    claim = status.state.claim
    if claim is None:
        lines.append("in progress:   nothing")
    else:
        target = describe_slot(claim.slot_key, tz) if claim.slot_key else "manual request"
        lines.append(
            f"in progress:   run {claim.run_id} for {target} -> {claim.release_version} "
            f"({claim.phase}, attempt {max(claim.attempts, 1)})"
        )
    if status.updater_step is not None:
        lines.append(f"updater:       {status.updater_step}")
    if status.state.last_consumed is not None:
        lines.append(f"last slot:     {describe_slot(status.state.last_consumed.key, tz)}")
    full = (
        " (the most it holds: each new one sets the oldest aside in outbox/rejected/)"
        if status.pending_reports >= MAX_PENDING_REPORTS
        else ""
    )
    lines.append(f"outbox:        {status.pending_reports} report(s) waiting to be delivered{full}")
    if status.state.recent_runs:
        lines.append("last runs:")
        for record in reversed(status.state.recent_runs[-10:]):
            lines.append(f"  {describe_run(record, tz)}")
    else:
        lines.append("last runs:     none yet")
    return "\n".join(lines)
