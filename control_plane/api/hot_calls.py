"""The services' answers from memory, as the hot-answer middleware (`answers_cache.hot_answers`)
asks for them: the same service methods and response classes as the routes'."""

from __future__ import annotations

from datetime import datetime

from starlette.responses import Response

from control_plane.answers_cache.in_flight import GrantsInFlight, KnownRoom
from control_plane.answers_cache.own_writes import ReplicaWrites
from control_plane.api.answers import InertJSON, refusal_response
from control_plane.api.routes.agent_config import etag_matches
from control_plane.errors import RequestRefused
from control_plane.poll_word import PollWord
from control_plane.registry import Services
from ground.contract import ClaimRequest, ReleaseTrack

__all__ = ["ServicesFromMemory"]


class ServicesFromMemory:
    """`answers_cache.hot_answers.FromMemory` over the application's services."""

    def __init__(self, services: Services) -> None:
        self._services = services

    @property
    def writes(self) -> ReplicaWrites:
        return self._services.answers.writes

    @property
    def grants_in_flight(self) -> GrantsInFlight:
        return self._services.claims.grants_in_flight

    def config(
        self,
        secret_sha256: str,
        track: ReleaseTrack,
        now: datetime,
        *,
        host_id: str | None,
        trust_root: str | None,
        host_time: str | None,
        if_none_match: str | None,
    ) -> Response | None:
        word = PollWord.read(
            host_id=host_id,
            trust_root=trust_root,
            dates=() if host_time is None else (host_time,),
            now=now,
        )
        versioned = self._services.agent_config.remembered(secret_sha256, track, now, word)
        if versioned is None:
            return None
        answer_headers = {"ETag": versioned.etag, "Cache-Control": "no-cache"}
        if etag_matches(if_none_match, versioned.etag):
            return Response(status_code=304, headers=answer_headers)
        return InertJSON(versioned.at(now).model_dump(mode="json"), headers=answer_headers)

    def refuse_claim(
        self, secret_sha256: str, body: ClaimRequest, now: datetime
    ) -> KnownRoom | None:
        assert body.slot_key is not None, "the middleware hands on slot claims only"
        return self._services.claims.refuse_from_memory(
            secret_sha256, body.slot_key, body.from_version, now, track=body.track
        )

    def refusal(self, refused: RequestRefused) -> Response:
        return refusal_response(refused)
