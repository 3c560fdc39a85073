"""The releases' rollout said in the reader's language: stages and halts, the operators' actions
and notices, what an agent is offered and why, pins, holds and the operator's agent page's answers.

Like `wording`: every sentence is made from a catalog message, from the rollout's kinds and fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal
from zoneinfo import ZoneInfo

from control_plane.forecast.model import StageNight
from control_plane.panel.i18n import Language
from control_plane.panel.wording import outcome_reason
from control_plane.pins.holds import MAX_HOLD, MAX_HOLD_REASON_LENGTH
from control_plane.pins.services import MAX_PIN_REASON_LENGTH
from control_plane.rollout.waves import Wave
from ground.contract import HoldView

__all__ = [
    "MAX_FORCE_REASON",
    "agent_flags",
    "halt_run_outcome",
    "halt_run_text",
    "hold_problem",
    "hold_setter",
    "hold_text",
    "notice_text",
    "offer_basis",
    "offered_text",
    "operator_agent_error",
    "operator_agent_saved",
    "pin_text",
    "release_stage",
    "rollout_action",
    "rollout_done",
    "stage_night_text",
    "unverifiable_text",
    "wave_plan",
]

# The reason an operator gives for forcing an update from the panel (the trail keeps it).
MAX_FORCE_REASON = 500


def release_stage(lang: Language, stage: str | None, halted_reason: str | None = None) -> str:
    """A release's stage (canary → everyone) and halt, from the releases domain's fields."""
    if halted_reason:
        return lang.gettext("halted: %(reason)s", reason=halted_reason)
    if stage == "canary":
        return lang.gettext("canary (a first few agents)")
    if stage == "everyone":
        return lang.gettext("everyone")
    if stage == "halted":
        return lang.gettext("halted")
    return "—"


def rollout_action(lang: Language, action: str) -> str:
    """An operator's action on a release, as its button and its refusal name it."""
    names = {
        "promote": lang.gettext("promote to everyone"),
        "halt": lang.gettext("halt"),
        "resume": lang.gettext("resume"),
        "brake": lang.gettext("brake this release"),
        "unbrake": lang.gettext("release its brake"),
    }
    return names.get(action, action)


def rollout_done(lang: Language, action: str) -> str:
    done = {
        "promote": lang.gettext("The release is promoted: every agent of its pair is offered it."),
        "halt": lang.gettext("The release is halted: no agent starts it until it is resumed."),
        "resume": lang.gettext("The release is resumed: its agents may claim it again."),
        "brake": lang.gettext("The release's brake is on: no agent starts it."),
        "unbrake": lang.gettext("The release's brake is released."),
    }
    return done.get(action, "")


def offer_basis(lang: Language, basis: str | None) -> str:
    """Why an agent is offered the release it is offered (`rollout.offer`)."""
    if basis == "pinned":
        return lang.gettext("its pin")
    if basis == "current":
        return lang.gettext("the current release")
    if basis == "canary":
        return lang.gettext("a canary of the new release")
    if basis == "previous":
        return lang.gettext("the previous release, until the new one reaches everyone")
    return "—"


def hold_setter(lang: Language, set_by: str) -> str:
    """Who set a hold: the host itself, the customer, or an operator."""
    if set_by == "agent":
        return lang.gettext("set on the host")
    if set_by == "customer":
        return lang.gettext("set in the panel")
    if set_by == "operator":
        return lang.gettext("set by the operators")
    return set_by


def hold_text(lang: Language, hold: HoldView, zone: ZoneInfo) -> str:
    """'held until …' with who set it."""
    return lang.gettext(
        "held until %(when)s (%(who)s)",
        when=lang.moment(hold.until, zone),
        who=hold_setter(lang, hold.set_by),
    )


def notice_text(lang: Language, kind: str, body: dict[str, Any]) -> str:
    """An operators' notice, worded from its facts (the halt's release and counts)."""
    if kind == "release.halted":
        return lang.gettext(
            "Release %(version)s (%(channel)s / %(platform)s) was halted automatically:"
            " %(failures)s of %(finished)s finished updates failed or were rolled back.",
            version=body.get("version", "—"),
            channel=body.get("channel", "—"),
            platform=body.get("platform", "—"),
            failures=lang.number(int(body.get("failures") or 0)),
            finished=lang.number(int(body.get("finished") or 0)),
        )
    return lang.gettext("A notice of a kind this panel does not know (%(kind)s).", kind=kind)


def halt_run_outcome(lang: Language, status: str, reason: str | None) -> str:
    """How a run that tripped a halt ended (`failed` or `rolled_back`), and why when it says."""
    why = outcome_reason(lang, reason)
    if status == "rolled_back":
        if why is None:
            return lang.gettext("rolled back")
        return lang.gettext("rolled back: %(reason)s", reason=why)
    if why is None:
        return lang.gettext("failed")
    return lang.gettext("failed: %(reason)s", reason=why)


def halt_run_text(
    lang: Language,
    *,
    agent: str,
    org: str,
    from_version: str | None,
    to_version: str,
    status: str,
    reason: str | None,
) -> str:
    """One run that tripped a halt: its agent and organisation, the update and how it ended."""
    return lang.gettext(
        "%(agent)s (%(org)s): from %(from_version)s to %(to_version)s, %(outcome)s",
        agent=agent,
        org=org,
        from_version=from_version or "—",
        to_version=to_version,
        outcome=halt_run_outcome(lang, status, reason),
    )


def pin_text(lang: Language, pin: Any, zone: ZoneInfo) -> str:
    """A pin (`PinView`): to which version, or held at what it runs; by whom, when and why."""
    target = (
        lang.gettext("pinned to %(version)s", version=pin.version)
        if pin.version
        else lang.gettext("held at the version it runs")
    )
    return lang.gettext(
        "%(target)s — by %(who)s on %(when)s: %(reason)s",
        target=target,
        who=pin.set_by,
        when=lang.moment(pin.set_at, zone),
        reason=pin.reason or "—",
    )


def offered_text(lang: Language, release: Any) -> str:
    """An agent's offer (`AgentRelease`): the version, its stage and why, or nothing."""
    offered = release.offered
    if offered is None:
        return lang.gettext("nothing is offered")
    # Only punctuation around the worded parts: nothing here to translate.
    stage, why = release_stage(lang, offered.stage), offer_basis(lang, release.basis)
    text = f"{offered.version} ({stage}; {why})"
    if offered.halted:
        text += " — " + lang.gettext("halted")
    if offered.braked:
        text += " — " + lang.gettext("its brake is on")
    return text


def agent_flags(lang: Language, release: Any, pin: Any, zone: ZoneInfo) -> str:
    """The short line of an agent's pin, hold and canary marking on an operator's list."""
    parts = []
    if pin is not None:
        parts.append(
            lang.gettext("pinned to %(version)s", version=pin.version)
            if pin.version
            else lang.gettext("held at the version it runs")
        )
    elif release.pinned:
        parts.append(lang.gettext("the organisation's pin"))
    if release.hold is not None:
        parts.append(hold_text(lang, release.hold, zone))
    if release.canary:
        parts.append(lang.gettext("canary"))
    return "; ".join(parts) or "—"


def operator_agent_saved(lang: Language, saved: str) -> str:
    done = {
        "canary": lang.gettext("The canary marking is saved."),
        "pin": lang.gettext("The pin is set."),
        "unpin": lang.gettext("The pin is removed."),
        "forced": lang.gettext(
            "A forced update is asked for: the agent starts it at its next poll."
        ),
        "hold": lang.gettext("The agent is held."),
        "unhold": lang.gettext("The hold is ended: scheduled updates run again."),
    }
    return done.get(saved, "")


def hold_problem(lang: Language, field: Literal["until", "reason"]) -> str:
    """What is wrong with a hold's day or reason, as every hold form says it: one agent's, the
    bulk actions', the operator's agent page."""
    if field == "until":
        return lang.gettext(
            "Choose a day after today, at most %(count)s days ahead.",
            count=lang.number(MAX_HOLD.days),
        )
    return lang.gettext(
        "Give a reason of at most %(count)s characters.",
        count=lang.number(MAX_HOLD_REASON_LENGTH),
    )


def operator_agent_error(lang: Language, field: str) -> str:
    if field == "version":
        return lang.gettext(
            "Give the version of a published release that is not withdrawn, or choose to hold"
            " at the version it runs."
        )
    if field == "hold_until":
        return hold_problem(lang, "until")
    if field == "hold_reason":
        return hold_problem(lang, "reason")
    if field in ("reason", "force_reason"):
        limit = MAX_PIN_REASON_LENGTH if field == "reason" else MAX_FORCE_REASON
        return lang.gettext(
            "Give a reason of at most %(count)s characters.", count=lang.number(limit)
        )
    return lang.gettext("That could not be done: the agent has no pin to remove.")


def wave_plan(lang: Language, waves: Sequence[Wave]) -> str:
    """The plan of waves in one line: who each wave reaches, first to last."""
    steps = []
    for wave in waves:
        share = lang.number(wave.share_percent)
        if wave is waves[-1]:
            steps.append(lang.gettext("everyone"))
        elif wave.canaries and wave.share_percent:
            steps.append(
                lang.gettext("the marked canaries and %(share)s%% of the agents", share=share)
            )
        elif wave.canaries:
            steps.append(lang.gettext("the marked canaries"))
        else:
            steps.append(lang.gettext("%(share)s%% of the agents", share=share))
    return " → ".join(steps)


def stage_night_text(lang: Language, night: StageNight) -> str:
    """How many agents get a release on a night at one stage, within the caps."""
    if night.agents == 0:
        return lang.gettext("no agent needs it")
    return lang.ngettext(
        "%(can)s of %(count)s agent gets it, %(miss)s misses its window",
        "%(can)s of %(count)s agents get it, %(miss)s miss their window",
        night.agents,
        can=lang.number(night.can_update),
        count=lang.number(night.agents),
        miss=lang.number(night.will_miss),
    )


def unverifiable_text(lang: Language, release: Any) -> str:
    """A release the newest trust root leaves unverifiable (`UnverifiableRelease`): which one,
    how it is offered, and what to do (its commands are shown beside, as the command line
    prints them)."""
    where = f"{release.channel} / {release.platform}"
    named = (
        lang.gettext(
            "Nachtwacht's own agent %(version)s (%(pair)s)", version=release.version, pair=where
        )
        if release.product == "updater"
        # Only punctuation around the version: nothing here to translate.
        else f"{release.version} ({where})"
    )
    if release.offered_as == "current":
        return lang.gettext(
            "%(release)s is its pair's current release: sign the same build again with a"
            " release key the root names, on the signing machine, and publish it; it takes this"
            " signing's place in its wave.",
            release=named,
        )
    if release.offered_as == "previous":
        return lang.gettext(
            "%(release)s is offered to the agents the current release's canary rollout has not"
            " reached yet: promote the current release to everyone, or withdraw this one (those"
            " agents are then offered the next older release, named here if the same key"
            " signed it).",
            release=named,
        )
    return lang.gettext(
        "%(release)s is not its pair's current release: it is offered only to agents pinned to"
        " its version, and a rollback to it is refused. Withdraw it, or, if a pin or a rollback"
        " needs it, sign the same build again and publish it.",
        release=named,
    )
