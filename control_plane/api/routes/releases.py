"""Releases for the operators: publish (`POST /v1/admin/releases`), list per (channel, platform)
(`GET`), withdraw (`POST /v1/admin/releases/{release_id}/withdraw`), roll a pair back
(`POST /v1/admin/releases/rollback`)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import asdict, dataclass
from typing import Literal
from uuid import UUID

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from control_plane.accounts.services import actor_of
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, RequestNow, services_of
from control_plane.errors import InvalidInput
from control_plane.forecast.model import WaveOutlook
from control_plane.releases.rollback import MAX_ROLLBACK_REASON_LENGTH, RolledBack
from control_plane.releases.services import PublishedRelease
from control_plane.releases.withdrawal import (
    MAX_WITHDRAW_REASON_LENGTH,
    ReleaseList,
    WithdrawnRelease,
)
from ground.contract import API_PREFIX
from ground.contract.plain_text import REASON_PATTERN
from ground.limits import MAX_VERSION_LENGTH, RELEASE_NAME_PATTERN

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX + "/admin", tags=["operator"])


@dataclass(frozen=True, kw_only=True)
class PublishAnswer(PublishedRelease):
    """The release stored, and what publishing it does in the next day (the forecast's
    figures for the wave it starts in); None for a release already published."""

    first_wave: WaveOutlook | None = None


class ReleaseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    manifest_b64: str = Field(description="the exact bytes of manifest.json, base64")
    signature_b64: str = Field(description="the exact bytes of manifest.sig, base64")
    artifact_b64: str = Field(description="the build (.tar.gz), base64")
    patches_b64: dict[str, str] = Field(
        default_factory=dict,
        max_length=16,
        description="the patches the signed manifest offers, base64, by their base's tar sha256"
        " (`patches[].base_tar_sha256`); each must have its signed length and sha256. Agents on"
        " a base without a patch here download the artifact",
    )
    stage: Literal["canary", "everyone"] | None = Field(
        default=None,
        description="the stage it starts in; default: `canary` (the first wave) when its pair"
        " already has a release, `everyone` (the last wave) for the pair's first",
    )
    allow_downgrade: bool = Field(
        default=False,
        description="publish a version older than the pair's newest on purpose: it is stored as"
        " a rollback release, offered only once `POST /v1/admin/releases/rollback` makes it"
        " current; its signed manifest must allow a downgrade too (else every agent on a newer"
        " version refuses it)",
    )
    product: Literal["agent", "updater"] | None = Field(
        default=None,
        description="the product meant: `agent` (the managed agent) or `updater` (nachtwacht's"
        " own agent); a manifest that signs the other is refused (422 `release_rejected`);"
        " default: the one the manifest signs",
    )


def _decoded(field: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput(field, value[:20] + "…", "is not valid base64") from exc


@router.post(
    "/releases",
    status_code=201,
    response_model=PublishAnswer,
    responses={
        200: {
            "model": PublishAnswer,
            "description": "this exact manifest was already published (`already_published`)",
        },
        **errors(*AUTHENTICATED, 409, 422),
    },
)
def publish_release(
    body: ReleaseBody,
    request: Request,
    response: Response,
    caller: OperatorCaller,
    now: RequestNow,
) -> PublishAnswer:
    """Store a release after checking its signature against the pinned keys, its artifact against
    the manifest, its expiry, and that it is newer than every release of its (channel, platform);
    it becomes that pair's current release. The exact same manifest again is a 200, not an
    error. A version older than the pair's newest is refused (409 `release_downgrade`) unless
    `allow_downgrade` is given and the signed manifest allows a downgrade (else 422); then it is
    stored without becoming current (`current: false`, `downgrade_from`).

    The answer says what happens next: the stage and wave it starts in and, in `first_wave`,
    how many agents that wave reaches at their next slot within 24 hours, how many of them the
    caps serve, and when the first of them asks (the forecast's figures)."""
    published = services_of(request).releases.publish(
        _decoded("manifest_b64", body.manifest_b64),
        _decoded("signature_b64", body.signature_b64),
        _decoded("artifact_b64", body.artifact_b64),
        now=now,
        actor=actor_of(caller),
        stage=body.stage,
        allow_downgrade=body.allow_downgrade,
        patches={
            base: _decoded(f"patches_b64.{base[:16]}", value)
            for base, value in body.patches_b64.items()
        },
        product=body.product,
    )
    if published.already_published:
        response.status_code = 200
        return PublishAnswer(**asdict(published))
    outlook = services_of(request).forecast.publish_outlook(published.id, now=now)
    return PublishAnswer(**asdict(published), first_wave=outlook)


class WithdrawBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(
        json_schema_extra={"pattern": REASON_PATTERN},
        min_length=1,
        max_length=MAX_WITHDRAW_REASON_LENGTH,
        examples=["1.6.0 corrupts the cache on upgrade"],
        description="required: why the release is withdrawn (kept with it, shown in the list)",
    )
    replacement: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_VERSION_LENGTH,
        examples=["1.5.0"],
        description="the version of the same (channel, platform) to offer instead; "
        "default: the newest release of the pair that is not withdrawn",
    )


@router.get("/releases", response_model=ReleaseList, responses=errors(*AUTHENTICATED))
def list_releases(request: Request, caller: OperatorCaller) -> ReleaseList:
    """Every release per (channel, platform), newest first: which one is current, which are
    withdrawn (when, why, by whom) and which agents still run a withdrawn version."""
    del caller
    return services_of(request).releases.list()


@router.post(
    "/releases/{release_id}/withdraw",
    response_model=WithdrawnRelease,
    responses=errors(*AUTHENTICATED, 404, 409, 422),
)
def withdraw_release(
    release_id: UUID,
    body: WithdrawBody,
    request: Request,
    caller: OperatorCaller,
    now: RequestNow,
) -> WithdrawnRelease:
    """Withdraw a release at once: claims stop offering it, its outstanding tokens are revoked
    (downloads answer 403 `token_revoked`), and its pair is offered `replacement` or the newest
    release that is not withdrawn. Agents already on it keep it."""
    return services_of(request).releases.withdraw(
        release_id,
        reason=body.reason,
        replacement=body.replacement,
        now=now,
        actor=actor_of(caller),
    )


class RollbackBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel: str = Field(pattern=RELEASE_NAME_PATTERN, max_length=64, examples=["stable"])
    platform: str = Field(pattern=RELEASE_NAME_PATTERN, max_length=64, examples=["linux-x86_64"])
    to: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_VERSION_LENGTH,
        examples=["1.1.0"],
        description="the version to go back to; default: the newest version older than the"
        " current release that is neither withdrawn nor halted",
    )
    reason: str = Field(
        json_schema_extra={"pattern": REASON_PATTERN},
        min_length=1,
        max_length=MAX_ROLLBACK_REASON_LENGTH,
        examples=["1.2.0 corrupts the cache on upgrade"],
        description="required: why the pair goes back (kept in the trail and with the withdrawn"
        " release)",
    )
    stage: Literal["canary", "everyone"] = Field(
        default="everyone",
        description="the stage the older build is offered at; default `everyone`: it is the"
        " build the fleet ran before",
    )
    product: Literal["agent", "updater"] = Field(
        default="agent",
        description="the product line to roll back: the managed agent (default) or nachtwacht's"
        " own agent (`updater`); the other line is not touched",
    )


@router.post(
    "/releases/rollback",
    response_model=RolledBack,
    responses=errors(*AUTHENTICATED, 409, 422),
)
def roll_back_pair(
    body: RollbackBody,
    request: Request,
    caller: OperatorCaller,
    now: RequestNow,
) -> RolledBack:
    """Roll a (channel, platform) back: its current release is withdrawn (outstanding tokens
    revoked) and a signed downgrade release of the older version becomes current, so hosts on
    the bad build take it at their next slot through the caps. Refused with 409
    `rollback_not_signed` (naming the commands to run on the signing machine) while no release of
    that version is signed as a downgrade: the control plane holds no release key."""
    return services_of(request).releases.roll_back(
        channel=body.channel,
        platform=body.platform,
        to=body.to,
        reason=body.reason,
        stage=body.stage,
        now=now,
        actor=actor_of(caller),
        product=body.product,
    )
