"""A manual update's progress as the reader follows it: the steps from the click to the outcome.

The steps are read from the run as the services report it (its status, and — when the services
record it — the moment the agent switched), worded in the reader's language. The same steps feed
the progress page and its JSON twin, which the page's small script polls (`static/progress.js`);
without the script the page refreshes itself while the update runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from zoneinfo import ZoneInfo

from control_plane.panel import wording
from control_plane.panel.i18n import Language
from control_plane.runs.views import RunView

__all__ = ["FINISHED_BAD", "Progress", "Step", "progress_of"]

StepState = Literal["done", "current", "waiting"]

# A run in one of these has ended; every other status is still on its way.
UNFINISHED = frozenset({"requested", "claimed"})
# Ended, and not as the reader hoped: the outcome is shown as a warning.
FINISHED_BAD = frozenset({"failed", "rolled_back", "unauthorised", "missed", "skipped"})


@dataclass(frozen=True, kw_only=True)
class Step:
    text: str
    state: StepState


@dataclass(frozen=True, kw_only=True)
class Progress:
    run_id: str
    status: str
    done: bool
    good: bool  # ended well (updated, or nothing to do)
    steps: tuple[Step, ...]
    outcome: str  # the run's line, as the agent page's list says it


def _state(reached: bool, current: bool) -> StepState:
    if current:
        return "current"
    return "done" if reached else "waiting"


def progress_of(lang: Language, run: RunView, zone: ZoneInfo) -> Progress:
    status = run.status
    done = status not in UNFINISHED
    claimed = status != "requested"
    switched = getattr(run, "switched_at", None) is not None
    steps = [
        Step(
            text=lang.gettext(
                "You asked for an update at %(when)s.", when=lang.moment(run.created_at, zone)
            ),
            state="done",
        ),
        Step(
            text=lang.gettext("The agent picks up the request at its next check-in."),
            state=_state(claimed, status == "requested"),
        ),
        Step(
            text=lang.gettext("The agent downloads the new version and checks its signature."),
            state=_state(done or switched, status == "claimed" and not switched),
        ),
        Step(
            text=lang.gettext(
                "The agent switches to the new version and checks that it is healthy."
            ),
            state=_state(done, status == "claimed" and switched),
        ),
    ]
    outcome = wording.status_text(lang, run)
    steps.append(
        Step(
            text=lang.gettext("Outcome: %(outcome)s", outcome=outcome)
            if done
            else lang.gettext("Outcome: not yet known"),
            state="done" if done else "waiting",
        )
    )
    return Progress(
        run_id=str(run.run_id),
        status=status,
        done=done,
        good=done and status not in FINISHED_BAD,
        steps=tuple(steps),
        outcome=outcome,
    )
