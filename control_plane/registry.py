"""Every domain's service, built once per process by `build_services`.

Each service takes its pool (and what it needs besides: the trusted release keys, the refusal
recorder) in its constructor, and `now` as an argument: none holds a clock. Routes reach them
through `request.app.state.services` and never build one.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from control_plane.accounts.oidc import OidcService
from control_plane.accounts.people import PeopleService
from control_plane.accounts.services import AccountService
from control_plane.accounts.sessions import SessionService
from control_plane.agent_config.services import AgentConfigService, seen_recorder
from control_plane.agents.fleet import FleetService
from control_plane.agents.services import AgentService
from control_plane.answers_cache import AnswerMemory, SeenRecorder
from control_plane.brake.services import BrakeService
from control_plane.claims.refusals import RefusalRecorder
from control_plane.claims.services import ClaimService
from control_plane.enrollment.services import EnrollmentService
from control_plane.events.services import EventService
from control_plane.forecast.services import ForecastService
from control_plane.history import HistoryService
from control_plane.liveness.clock_watch import ClockWatch
from control_plane.metrics.services import MetricsService
from control_plane.notifications.addresses import WebhookAddressPolicy
from control_plane.notifications.services import NotificationService, WebhookSettingsService
from control_plane.notifications.trial_delivery import WebhookTestService
from control_plane.pins.services import PinService
from control_plane.releases.services import ReleaseService
from control_plane.rollout.services import RolloutService
from control_plane.rollout.unverifiable import unverifiable_releases
from control_plane.runs.services import RunService
from control_plane.settings.services import SettingsService
from control_plane.trust_roots.services import TrustRootService
from control_plane.types import Pool

__all__ = ["Services", "build_services", "replica_identity"]


def replica_identity() -> str:
    """Names this replica in the worker's progress row and the metrics: host, process and a
    random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, kw_only=True)
class Services:
    accounts: AccountService
    sessions: SessionService  # the panel's sign-in sessions, ended with their key
    people: PeopleService  # named people: invitations, passwords, TOTP, their sessions
    oidc: OidcService  # an organisation's own OpenID Connect provider
    agents: AgentService
    agent_config: AgentConfigService
    settings: SettingsService
    claims: ClaimService
    refusals: RefusalRecorder
    runs: RunService
    events: EventService
    releases: ReleaseService
    brake: BrakeService
    notifications: NotificationService
    webhooks: WebhookSettingsService
    forecast: ForecastService
    metrics: MetricsService
    rollout: RolloutService  # stages, canaries, halts, the operators' inbox
    pins: PinService  # pins and holds
    # Where webhooks and OpenID Connect providers may point; the worker's sender too.
    webhook_policy: WebhookAddressPolicy
    replica: str  # names this process in the worker's progress row and in the metrics
    clock_watch: ClockWatch  # this process's clock against the database server's
    webhook_tests: WebhookTestService  # the panel's "send a test delivery", by the same policy
    # The agents' answers remembered; live only while a change feed reads into it
    # (`answers_cache.feed.feed_running`, started by each serving worker).
    answers: AnswerMemory
    seen: SeenRecorder
    fleet: FleetService  # the fleet by version and the organisations' names, one query each
    trust_roots: TrustRootService  # the published trust roots, as given
    enrollment: EnrollmentService  # enrollment tokens and the host's exchange of one
    history: HistoryService  # the panel's pages and exports of runs and events, versions per night


def build_services(
    pool: Pool,
    trusted_keys: Mapping[str, Ed25519PublicKey] | None = None,
    *,
    replica: str | None = None,
    webhook_policy: WebhookAddressPolicy | None = None,
    answers: AnswerMemory | None = None,
) -> Services:
    """Every service, built once; `trusted_keys` are the release keys publishing checks against."""
    refusals = RefusalRecorder(pool)
    answers = answers or AnswerMemory()
    seen = seen_recorder()
    identity = replica or replica_identity()
    addresses = webhook_policy or WebhookAddressPolicy()
    clock_watch = ClockWatch()
    return Services(
        accounts=AccountService(pool),
        sessions=SessionService(pool),
        people=PeopleService(pool),
        oidc=OidcService(pool, addresses),
        agents=AgentService(pool),
        agent_config=AgentConfigService(pool, memory=answers, seen=seen),
        settings=SettingsService(pool),
        claims=ClaimService(pool, refusals, memory=answers, seen=seen),
        refusals=refusals,
        runs=RunService(pool),
        events=EventService(pool),
        releases=ReleaseService(pool, trusted_keys or {}),
        brake=BrakeService(pool),
        notifications=NotificationService(pool),
        webhooks=WebhookSettingsService(pool, addresses),
        forecast=ForecastService(pool),
        metrics=MetricsService(pool, refusals, identity, clock_watch),
        rollout=RolloutService(pool),
        pins=PinService(pool),
        webhook_policy=addresses,
        replica=identity,
        clock_watch=clock_watch,
        webhook_tests=WebhookTestService(pool, addresses),
        answers=answers,
        seen=seen,
        fleet=FleetService(pool),
        trust_roots=TrustRootService(pool, find_unverifiable=unverifiable_releases),
        enrollment=EnrollmentService(pool),
        history=HistoryService(pool),
    )
