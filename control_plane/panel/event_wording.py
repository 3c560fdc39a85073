"""The trail's events, the notifications and a webhook's test delivery, in the reader's language.

Like `wording` (whose run reasons it reuses): every sentence is made from a catalog message from
the events' kinds and data, so no English string stored in the trail reaches a Dutch page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from control_plane.events.services import EventView
from control_plane.panel.customer_backend import WebhookTest
from control_plane.panel.i18n import Language
from control_plane.panel.rollout_wording import hold_setter
from control_plane.panel.wording import (
    RELEASE_STOPPED,
    key_name,
    miss_reason,
    missed_reason,
    outcome_reason,
    stopped_release_text,
)

__all__ = [
    "NAMED_AGENTS",
    "NamedAgent",
    "NamedAgents",
    "event_line",
    "notification_agents",
    "notification_lines",
    "webhook_test_text",
]

# A notification names at most this many agents; the others are counted, with a link to the
# organisation's agent list. Forty failures are a list to open, not a message to read.
NAMED_AGENTS = 10


def event_line(lang: Language, event: EventView) -> str:
    """One step on the timeline. A scheduled update's steps name the schedule, never a person."""
    version = event.data.get("version") or "?"
    by_schedule = event.actor.kind == "schedule"
    who = _person_named(lang, event)
    if event.kind == "update.requested":
        if who:
            return lang.gettext("%(who)s asked for an update now.", who=who)
        return lang.gettext("Someone in your organisation asked for an update now.")
    if event.kind == "schedule.changed" and who:
        return lang.gettext("%(who)s changed the update schedule.", who=who)
    if event.kind == "update.started":
        if event.data.get("forced"):
            return lang.gettext("The agent started the update our operators forced.")
        return lang.gettext("The agent started the update you asked for.")
    if event.kind == "update.scheduled":
        return lang.gettext("The schedule started an update.")
    if event.kind == "update.up_to_date":
        return lang.gettext("The schedule found the agent already up to date.")
    if event.kind == "update.succeeded":
        if by_schedule:
            return lang.gettext("Scheduled update to %(version)s succeeded.", version=version)
        return lang.gettext("Requested update to %(version)s succeeded.", version=version)
    if event.kind == "update.failed":
        if by_schedule:
            return lang.gettext("Scheduled update failed.")
        return lang.gettext("Requested update failed.")
    if event.kind == "update.rolled_back" and event.data.get("product") == "updater":
        # The old nachtwacht agent restored itself and said why.
        why = outcome_reason(lang, event.data.get("reason"))
        if why is None:
            return lang.gettext(
                "The update of nachtwacht's own agent to %(version)s was rolled back.",
                version=event.data.get("to_version") or "?",
            )
        return lang.gettext(
            "The update of nachtwacht's own agent was rolled back: %(reason)s", reason=why
        )
    if event.kind == "update.rolled_back":
        if by_schedule:
            return lang.gettext("Scheduled update was rolled back.")
        return lang.gettext("Requested update was rolled back.")
    if event.kind == "update.skipped":
        code = str(event.data.get("reason") or "")
        stopped = event.data.get("release_version")
        reason = (
            stopped_release_text(lang, str(stopped), event.data.get("stopped_by"))
            if code == RELEASE_STOPPED and stopped
            else miss_reason(lang, code)
        )
        return lang.gettext("The schedule skipped its slot: %(reason)s.", reason=reason)
    if event.kind == "update.missed":
        if event.data.get("reason"):
            reason = missed_reason(
                lang,
                str(event.data["reason"]),
                host_clock_offset_seconds=event.data.get("host_clock_offset_seconds"),
                unreachable_error=event.data.get("unreachable_error"),
            )
            return lang.gettext("The slot was missed: %(reason)s.", reason=reason)
        return lang.gettext("The slot was missed.")
    if event.kind == "update.unauthorised":
        return lang.gettext(
            "The agent switched after its permission ended; recorded, not counted as an update."
        )
    for line in (_people_event_line, _rollout_event_line, _operator_event_line):
        worded = line(lang, event)
        if worded is not None:
            return worded
    return lang.gettext("Other event (%(kind)s).", kind=event.kind)


def _people_event_line(lang: Language, event: EventView) -> str | None:
    """A person's change to the organisation's people; None for any other kind."""
    who = _person_named(lang, event) or "—"
    name = str(event.data.get("name") or "?")
    if event.kind == "person.removed":
        return lang.gettext("%(who)s removed %(name)s.", who=who, name=name)
    if event.kind == "person.role_changed":
        if event.data.get("to") == "editor":
            return lang.gettext("%(who)s made %(name)s an editor.", who=who, name=name)
        return lang.gettext("%(who)s made %(name)s a viewer.", who=who, name=name)
    if event.kind == "person.invitation_reissued":
        return lang.gettext("%(who)s made a new invitation link for %(name)s.", who=who, name=name)
    if event.kind == "person.password_reset":
        return lang.gettext("%(who)s reset the password of %(name)s.", who=who, name=name)
    if event.kind == "person.invited":
        return lang.gettext("%(who)s invited %(name)s.", who=who, name=name)
    return None


def _person_named(lang: Language, event: EventView) -> str | None:
    """Whom the trail names for a change made in the organisation: the person signed in as
    themselves (or a key's holder, as the key was named); None when nobody is named."""
    if event.actor.kind != "user" or not event.actor.name:
        return None
    return key_name(lang, event.actor.name)


def _rollout_event_line(lang: Language, event: EventView) -> str | None:
    """The steps of holds, pins, canary marking and forced updates on an agent's timeline."""
    if event.kind == "hold.set":
        who = hold_setter(lang, str(event.data.get("set_by") or ""))
        return lang.gettext("Scheduled updates were held (%(who)s).", who=who)
    if event.kind == "hold.released":
        return lang.gettext("The hold ended: scheduled updates run again.")
    if event.kind == "pin.set":
        if event.data.get("version"):
            return lang.gettext(
                "The operators pinned it to %(version)s.", version=event.data["version"]
            )
        return lang.gettext("The operators held it at the version it runs.")
    if event.kind == "pin.removed":
        return lang.gettext("The operators removed its pin.")
    if event.kind in ("canary.marked", "canary.unmarked"):
        return lang.gettext("The operators changed its canary marking.")
    if event.kind == "update.forced":
        return lang.gettext("The operators forced an update.")
    return None


def _operator_event_line(lang: Language, event: EventView) -> str | None:
    """The steps of the schedule, the agent's own record and the operators' actions."""
    version = event.data.get("version") or "?"
    lines = {
        "schedule.changed": lambda: lang.gettext("The update schedule was changed."),
        "default_schedule.changed": lambda: lang.gettext(
            "The schedule new agents take was changed."
        ),
        "agent.deleted": lambda: lang.gettext("The agent was removed."),
        "agent.release_retry_requested": lambda: lang.gettext(
            "The operators asked it to try the release it rolled back again."
        ),
        "token.revoked": lambda: lang.gettext("The operators withdrew a permission to update."),
        # The platform's brake pauses every update; a release's own only that release's rollout.
        "brake.engaged": lambda: (
            lang.gettext(
                "The operators paused the rollout of release %(version)s; other updates go on.",
                version=version,
            )
            if event.data.get("scope") == "release"
            else lang.gettext("The operators paused updates.")
        ),
        "brake.released": lambda: (
            lang.gettext(
                "The operators resumed the rollout of release %(version)s.", version=version
            )
            if event.data.get("scope") == "release"
            else lang.gettext("The operators resumed updates.")
        ),
        "settings.changed": lambda: lang.gettext("The operators changed the platform settings."),
        "rollout.settings_changed": lambda: lang.gettext(
            "The operators changed the rollout settings."
        ),
        "release.published": lambda: lang.gettext(
            "Release %(version)s was published.", version=version
        ),
        "release.withdrawn": lambda: lang.gettext(
            "Release %(version)s was withdrawn.", version=version
        ),
        # A rollback withdraws the release it goes back from.
        "release.rolled_back": lambda: lang.gettext(
            "Release %(version)s was withdrawn.", version=version
        ),
        "release.promoted": lambda: (
            lang.gettext("Release %(version)s is now for everyone.", version=version)
            if event.data.get("stage", "everyone") == "everyone"
            else lang.gettext(
                "Release %(version)s moved on to wave %(wave)s of %(waves)s.",
                version=version,
                wave=lang.number(int(event.data.get("wave") or 0)),
                waves=lang.number(int(event.data.get("waves") or 0)),
            )
        ),
        "release.halted": lambda: (
            lang.gettext(
                "Release %(version)s was halted automatically: too many of its updates failed.",
                version=version,
            )
            if event.data.get("cause") == "errors"
            else lang.gettext("Release %(version)s was halted.", version=version)
        ),
        "release.resumed": lambda: lang.gettext(
            "Release %(version)s was resumed.", version=version
        ),
        "trust_root.published": lambda: lang.gettext(
            "Trust root version %(version)s was published.", version=version
        ),
        "credential.issued": lambda: lang.gettext("A key was issued."),
        "credential.revoked": lambda: lang.gettext("A key was revoked."),
        "credential.rotated": lambda: lang.gettext("A key was replaced by a new one."),
        "notice.read": lambda: lang.gettext("An operator read a notice."),
        "webhook.tested": lambda: lang.gettext("A test delivery of the webhook was sent."),
        "enrollment_token.created": lambda: lang.gettext("An enrollment token was made."),
        "enrollment_token.revoked": lambda: lang.gettext("An enrollment token was revoked."),
        "enrollment_token.used": lambda: lang.gettext("A host joined with an enrollment token."),
        "enrollment_token.refused": lambda: lang.gettext(
            "A host was turned away with an enrollment token."
        ),
        "platform.restored": lambda: lang.gettext(
            "The platform's database was restored from a backup."
        ),
        "oidc.configured": lambda: lang.gettext(
            "The organisation's own sign-in provider was set up."
        ),
        "oidc.removed": lambda: lang.gettext(
            "The organisation's own sign-in provider was removed."
        ),
        "retention.completed": lambda: lang.gettext(
            "History older than the retention period was removed."
        ),
    }
    worded = lines.get(event.kind)
    return None if worded is None else worded()


def notification_lines(lang: Language, body: dict[str, Any]) -> list[str]:
    """A notification's summary from its counts (the stored English summary is not shown)."""
    counts = body.get("counts", {})
    lines = [
        lang.ngettext(
            "%(count)s agent had this slot.",
            "%(count)s agents had this slot.",
            int(counts.get("agents", 0)),
            count=lang.number(int(counts.get("agents", 0))),
        )
    ]
    for group in body.get("updated", []):
        lines.append(
            lang.ngettext(
                "%(count)s updated to %(version)s.",
                "%(count)s updated to %(version)s.",
                int(group["count"]),
                count=lang.number(int(group["count"])),
                version=group["version"],
            )
        )
    # One line per outcome that some agents had, in this order.
    outcome_lines: dict[str, Callable[[int], str]] = {
        "up_to_date": lambda n: lang.ngettext(
            "%(count)s already up to date.",
            "%(count)s already up to date.",
            n,
            count=lang.number(n),
        ),
        "failed": lambda n: lang.ngettext(
            "%(count)s failed.", "%(count)s failed.", n, count=lang.number(n)
        ),
        "rolled_back": lambda n: lang.ngettext(
            "%(count)s rolled back.", "%(count)s rolled back.", n, count=lang.number(n)
        ),
        "no_outcome": lambda n: lang.ngettext(
            "%(count)s without an outcome yet.",
            "%(count)s without an outcome yet.",
            n,
            count=lang.number(n),
        ),
    }
    for outcome, worded in outcome_lines.items():
        n = int(counts.get(outcome, 0))
        if n:
            lines.append(worded(n))
    for reason, n in body.get("missed_by_reason", {}).items():
        lines.append(
            lang.ngettext(
                "%(count)s missed: %(reason)s.",
                "%(count)s missed: %(reason)s.",
                int(n),
                count=lang.number(int(n)),
                reason=miss_reason(lang, reason),
            )
        )
    stale = len(body.get("not_updated_for_three_days", []))
    if stale:
        lines.append(
            lang.ngettext(
                "%(count)s agent has not updated for three days.",
                "%(count)s agents have not updated for three days.",
                stale,
                count=lang.number(stale),
            )
        )
    return lines


@dataclass(frozen=True, kw_only=True)
class NamedAgent:
    agent_id: str
    name: str
    what: str  # what became of its slot, with the reason where there is one


@dataclass(frozen=True, kw_only=True)
class NamedAgents:
    agents: tuple[NamedAgent, ...]
    more: int  # named in the notification's body but not on the page


def notification_agents(lang: Language, body: Mapping[str, Any]) -> NamedAgents:
    """The agents a person may have to look at, in the order they need it: failed, rolled back
    or switched without authorisation (each with its reason), missed (with its reason), without
    an outcome yet, not updated for three days; the first `NAMED_AGENTS` of them named."""
    named: list[NamedAgent] = []
    for entry in body.get("failed", []):
        named.append(_named(entry, _failure_words(lang, entry)))
    for entry in body.get("missed", []):
        reason = missed_reason(
            lang,
            entry.get("reason"),
            host_clock_offset_seconds=entry.get("host_clock_offset_seconds"),
            unreachable_error=entry.get("unreachable_error"),
        )
        named.append(_named(entry, lang.gettext("missed: %(reason)s", reason=reason)))
    for entry in body.get("no_outcome", []):
        named.append(_named(entry, lang.gettext("without an outcome yet")))
    for entry in body.get("not_updated_for_three_days", []):
        named.append(_named(entry, lang.gettext("not updated for three days")))
    return NamedAgents(agents=tuple(named[:NAMED_AGENTS]), more=max(0, len(named) - NAMED_AGENTS))


def _named(entry: Mapping[str, Any], what: str) -> NamedAgent:
    return NamedAgent(agent_id=str(entry.get("agent_id", "")), name=str(entry["name"]), what=what)


def _failure_words(lang: Language, entry: Mapping[str, Any]) -> str:
    why = outcome_reason(lang, entry.get("reason"))
    status = entry.get("status")
    if status == "rolled_back" and entry.get("product") == "updater":
        # The old nachtwacht agent restored itself; the managed agent was not touched.
        if why is None:
            return lang.gettext("its own nachtwacht agent's update rolled back")
        return lang.gettext("its own nachtwacht agent's update rolled back: %(reason)s", reason=why)
    if status == "rolled_back":
        if why is None:
            return lang.gettext("rolled back")
        return lang.gettext("rolled back: %(reason)s", reason=why)
    if status == "unauthorised":
        return lang.gettext(
            "switched after its permission ended; recorded, not counted as an update"
        )
    if why is None:
        return lang.gettext("failed")
    return lang.gettext("failed: %(reason)s", reason=why)


def webhook_test_text(lang: Language, test: WebhookTest) -> str:
    """What came of a test delivery (`customer_backend.WebhookTest`): delivered, or why not, in
    words."""
    if test.delivered:
        return lang.gettext(
            "The test arrived: your address answered HTTP %(status)s.",
            status=test.status_code,
        )
    if test.failure == "http_status":
        return lang.gettext(
            "The test did not arrive: your address answered HTTP %(status)s; "
            "an answer from 200 to 299 counts as delivered.",
            status=test.status_code,
        )
    if test.failure == "address_refused":
        return lang.gettext(
            "The test was not sent: the address is not one we may send to (it is not public, "
            "and our operators have not allowed its network)."
        )
    if test.failure == "timeout":
        return lang.gettext("The test did not arrive: your address did not answer in time.")
    return lang.gettext("The test did not arrive: no connection could be made to your address.")
