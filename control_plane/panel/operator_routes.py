"""The operators' screens: the brake (with a required reason), the settings, the trust root, the
nights."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from markupsafe import Markup

from control_plane.forecast.model import ReleaseNight
from control_plane.panel import backend, operator_backend, wording
from control_plane.panel.charts import Bar, Series, Stack, stacked_chart
from control_plane.panel.fleet import fleet_chart, fleet_counts
from control_plane.panel.i18n import Language
from control_plane.panel.readers import Csrf, operator_of, operator_post
from control_plane.panel.tonight import tonight
from control_plane.panel.web import (
    PREFIX,
    PanelContext,
    forecast_chart,
    page,
    redirect,
    whole_number,
)
from control_plane.rollout.services import RolloutOverview
from control_plane.runs.services import SlotOutcomes
from ground.contract import MissReason
from ground.contract.plain_text import first_bidi_control, first_control_character, shown
from ground.limits import MAX_CAP, MAX_CATCH_UP_MINUTES, MIN_CAP, MIN_CATCH_UP_MINUTES

__all__ = ["operator_of", "router"]

router = APIRouter(prefix=PREFIX + "/operator", include_in_schema=False)

FORECAST_NIGHTS = 3
# The pictures of what happened look back this far: the night just past, whatever the hour.
LOOK_BACK = timedelta(hours=24)
# How a slot's runs stack, bottom up: what went well, what is still going, what went wrong.
OUTCOME_ORDER = ("succeeded", "up_to_date", "claimed", "failed", "rolled_back", "missed")
# The legend's order: the agent's side, the limits, our side, the holds, the host's clock, and
# what cannot be told.
MISS_REASONS: tuple[str, ...] = tuple(
    reason.value
    for reason in (
        MissReason.OFFLINE,
        MissReason.UNREACHABLE,
        MissReason.THROTTLED,
        MissReason.BRAKE,
        MissReason.PLATFORM_UNAVAILABLE,
        MissReason.HELD,
        MissReason.HOST_CLOCK,
        MissReason.UNKNOWN,
    )
)
# Shown in the legend even when no slot missed for them: the reasons of every night.
ALWAYS_SHOWN = frozenset(
    {MissReason.OFFLINE, MissReason.THROTTLED, MissReason.BRAKE, MissReason.UNKNOWN}
)
MAX_REASON = 500


def _night_charts(
    ctx: PanelContext,
) -> tuple[list[tuple[Markup, tuple[ReleaseNight, ...]]], RolloutOverview]:
    """Each coming night: its demand per slot against the caps; and for tonight, who gets each
    pair's current release at each stage (the offers as they stand now); with the rollout's
    overview, read from the same offers. The first night is the customers' "Tonight"
    (`tonight.tonight`): after the morning the night just past is no longer coming."""
    zone = backend.platform(ctx.services).zone
    first = tonight(ctx.now, zone).day
    charts = []
    days = [first + timedelta(days=offset) for offset in range(FORECAST_NIGHTS)]
    forecasts, rollout = operator_backend.nights_with_rollout(ctx.services, days, now=ctx.now)
    for day, forecast in zip(days, forecasts, strict=True):
        chart = forecast_chart(
            ctx,
            day,
            [
                Bar(
                    label=ctx.lang.time_with_zone(s.at, zone),
                    total=s.agents,
                    part=s.can_update,
                    limit=s.capacity,
                )
                for s in forecast.slots
            ],
        )
        charts.append((chart, forecast.releases))
    return charts, rollout


def _outcome_statuses(outcomes: tuple[SlotOutcomes, ...]) -> tuple[str, ...]:
    """The usual statuses always; `unauthorised` (a switch after its permission ended) and any
    status the panel does not know only when a slot holds them."""
    found = {status for slot in outcomes for status in slot.counts}
    extra = tuple(sorted(found - set(OUTCOME_ORDER) - {"unauthorised"}))
    return OUTCOME_ORDER + (("unauthorised",) if "unauthorised" in found else ()) + extra


def _outcome_series(ctx: PanelContext, statuses: tuple[str, ...]) -> list[Series]:
    legends = {
        "succeeded": ctx.lang.gettext("updated"),
        "up_to_date": ctx.lang.gettext("already up to date"),
        "claimed": ctx.lang.gettext("in progress"),
        "failed": ctx.lang.gettext("failed"),
        "rolled_back": ctx.lang.gettext("rolled back"),
        "missed": ctx.lang.gettext("missed"),
        "unauthorised": ctx.lang.gettext("switched without permission"),
    }
    return [
        Series(
            legend=legends.get(status) or ctx.lang.gettext("unknown state"),
            css="chart-" + status.replace("_", "-"),
        )
        for status in statuses
    ]


def _past_charts(ctx: PanelContext) -> list[Markup]:
    """The last 24 hours: grants per round against the cap, outcomes per slot, misses by reason."""
    zone = backend.platform(ctx.services).zone
    since, until = ctx.now - LOOK_BACK, ctx.now
    grants = operator_backend.grants_per_round(ctx.services, since=since, until=until)
    outcomes = operator_backend.outcomes_per_slot(ctx.services, since=since, until=until).slots

    def number(n: int) -> str:
        return ctx.lang.number(n)

    grant_chart = stacked_chart(
        [
            Stack(label=ctx.lang.time_with_zone(r.round_start, zone), parts=(r.granted,))
            for r in grants.rounds
        ],
        series=[Series(legend=ctx.lang.gettext("updates granted"), css="chart-granted")],
        limit=grants.global_cap,
        limit_legend=ctx.lang.gettext("the platform's cap per minute"),
        title=ctx.lang.gettext("Updates granted per minute in the last 24 hours"),
        empty_text=ctx.lang.gettext("No update was granted in the last 24 hours."),
        number=number,
    )
    statuses = _outcome_statuses(outcomes)
    outcome_chart = stacked_chart(
        [
            Stack(
                label=ctx.lang.time_with_zone(slot.slot_at, zone),
                parts=tuple(slot.counts.get(status, 0) for status in statuses),
            )
            for slot in outcomes
        ],
        series=_outcome_series(ctx, statuses),
        title=ctx.lang.gettext("Outcomes per slot in the last 24 hours"),
        empty_text=ctx.lang.gettext("No update slot in the last 24 hours."),
        number=number,
    )
    missed = [slot for slot in outcomes if slot.missed_by_reason]
    reasons = _miss_reasons(outcomes)
    miss_chart = stacked_chart(
        [
            Stack(
                label=ctx.lang.time_with_zone(slot.slot_at, zone),
                parts=tuple(slot.missed_by_reason.get(reason, 0) for reason in reasons),
            )
            for slot in missed
        ],
        series=[
            Series(
                legend=wording.miss_reason(ctx.lang, reason),
                css="chart-miss-" + reason.replace("_", "-"),
            )
            for reason in reasons
        ],
        title=ctx.lang.gettext("Missed updates by reason in the last 24 hours"),
        empty_text=ctx.lang.gettext("No update was missed in the last 24 hours."),
        number=number,
    )
    return [grant_chart, outcome_chart, miss_chart]


def _miss_reasons(outcomes: tuple[SlotOutcomes, ...]) -> tuple[str, ...]:
    """The first milestone's reasons always, a newer one when the data holds it, then any reason
    the panel does not know (worded "reason unknown" rather than left out of the picture)."""
    found = {reason for slot in outcomes for reason in slot.missed_by_reason}
    known = tuple(r for r in MISS_REASONS if r in ALWAYS_SHOWN or r in found)
    return known + tuple(sorted(found - set(MISS_REASONS)))


def _overview(
    ctx: PanelContext,
    *,
    status_code: int = 200,
    brake_error: str | None = None,
    settings_error: str | None = None,
    settings_typed: dict[str, str] | None = None,
    saved: str | None = None,
) -> Response:
    """The operators' start page; a refused setting is said at its field, with the values as
    they were typed (`settings_typed`) in the form."""
    charts, rollout = _night_charts(ctx)
    return page(
        ctx,
        "operator.html",
        status_code=status_code,
        brake=operator_backend.brake(ctx.services),
        platform=backend.platform(ctx.services),
        trust_root=operator_backend.trust_root(ctx.services),
        unverifiable=operator_backend.unverifiable_releases(ctx.services),
        now=ctx.now,
        charts=charts,
        past_charts=_past_charts(ctx),
        fleet_chart=fleet_chart(
            ctx.lang, fleet_counts(operator_backend.fleet_versions(ctx.services))
        ),
        rollout=rollout,
        brake_error=brake_error,
        settings_error=settings_error,
        settings_text=(
            _settings_problem(ctx, settings_error, settings_typed or {}) if settings_error else None
        ),
        settings_typed=settings_typed,
        saved=saved,
    )


@router.get("")
def overview(request: Request, saved: str | None = None) -> Response:
    ctx = operator_of(request)
    return _overview(ctx, saved=saved if saved in {"brake", "settings"} else None)


@router.post("/brake")
def set_brake(
    request: Request,
    csrf: Csrf = "",
    engaged: Annotated[str, Form()] = "0",
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    post = operator_post(request, csrf)
    ctx = post.ctx
    engage = engaged == "1"
    reason = reason.strip()
    problem = _brake_problem(ctx.lang, reason) if engage else None
    if problem is None:
        try:
            operator_backend.set_brake(
                ctx.services, engaged=engage, reason=reason or None, actor=post.actor, now=ctx.now
            )
        except backend.Refused:
            problem = ctx.lang.gettext("Give a reason of at most 500 characters.")
    if problem is not None:
        return _overview(ctx, status_code=422, brake_error=problem)
    return redirect(f"{PREFIX}/operator?saved=brake")


def _brake_problem(lang: Language, reason: str) -> str | None:
    """What is wrong with the brake's reason (None: nothing): agents show it to their hosts'
    admins, so it must say something, fit its bound and be plain text."""
    if not reason or len(reason) > MAX_REASON:
        return lang.gettext("Give a reason of at most 500 characters.")
    control = first_control_character(reason) or first_bidi_control(reason)
    if control is not None:
        return lang.gettext(
            "Reason: “%(value)s” contains a control character (%(code)s). Give a reason of at"
            " most %(count)s characters, in plain text.",
            value=shown(reason[:80]) + ("…" if len(reason) > 80 else ""),
            code=f"U+{ord(control):04X}",
            count=lang.number(MAX_REASON),
        )
    return None


@router.post("/settings")
def save_settings(
    request: Request,
    csrf: Csrf = "",
    timezone: Annotated[str, Form(max_length=100)] = "",
    catch_up_minutes: Annotated[str, Form(max_length=10)] = "",
    org_cap: Annotated[str, Form(max_length=10)] = "",
    global_cap: Annotated[str, Form(max_length=10)] = "",
) -> Response:
    post = operator_post(request, csrf)
    ctx = post.ctx
    typed = {
        "timezone": timezone,
        "catch_up_minutes": catch_up_minutes,
        "org_cap": org_cap,
        "global_cap": global_cap,
    }
    changes: dict[str, object] = {"timezone": timezone.strip()}
    for name in ("catch_up_minutes", "org_cap", "global_cap"):
        number = whole_number(typed[name].strip())
        if number is None:
            return _overview(ctx, status_code=422, settings_error=name, settings_typed=typed)
        changes[name] = number
    try:
        backend.update_platform(ctx.services, changes, actor=post.actor, now=ctx.now)
    except backend.Refused as exc:
        field = exc.field if exc.field in typed else "catch_up_minutes"
        return _overview(ctx, status_code=422, settings_error=field, settings_typed=typed)
    return redirect(f"{PREFIX}/operator?saved=settings")


def _settings_problem(ctx: PanelContext, field: str, typed: dict[str, str]) -> str:
    """What is wrong with a refused setting: its label, the value as typed (shown, not obeyed)
    and what is accepted."""
    lang = ctx.lang
    value = shown(typed.get(field, "")[:40])
    label = _settings_label(lang, field)
    if field == "timezone":
        return lang.gettext(
            "%(field)s: “%(value)s” is not a time zone we know. Give its IANA name, such as"
            " Europe/Amsterdam.",
            field=label,
            value=value,
        )
    current = backend.platform(ctx.services)
    number = whole_number(typed.get(field, "").strip())
    if field == "org_cap" and number is not None and MIN_CAP <= number <= MAX_CAP:
        total = whole_number(typed.get("global_cap", "").strip())
        return lang.gettext(
            "%(field)s: “%(value)s” is more than the updates in total per minute (%(total)s).",
            field=label,
            value=value,
            total=lang.number(total if total is not None else current.global_cap),
        )
    if field == "catch_up_minutes":
        # The window's last minute grants no new token: a window must have one before it.
        low = max(MIN_CATCH_UP_MINUTES, current.grant_margin_seconds // 60 + 1)
        high = MAX_CATCH_UP_MINUTES
    else:
        low, high = MIN_CAP, MAX_CAP
    return lang.gettext(
        "%(field)s: “%(value)s” is not accepted. Give a whole number from %(low)s to %(high)s.",
        field=label,
        value=value,
        low=lang.number(low),
        high=lang.number(high),
    )


def _settings_label(lang: Language, field: str) -> str:
    labels = {
        "timezone": lang.gettext("Time zone of every schedule"),
        "catch_up_minutes": lang.gettext("Catch-up window (minutes)"),
        "org_cap": lang.gettext("Updates per organisation per minute"),
        "global_cap": lang.gettext("Updates in total per minute"),
    }
    return labels[field]
