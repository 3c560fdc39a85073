"""What an agent pulls every minute: its schedule, the platform's time settings, brake and release.

The answer is the contract's `AgentConfig`. Its ETag covers everything but `server_time` and
`contract_version`, so an agent whose config did not change gets a 304 — from a replica of either
release while the control plane is upgraded.

With an `AnswerMemory` fed by the change feed (a serving worker's), the answer read through a
credential is remembered under (credential hash, channel, platform): `remembered` gives it back
without the database, and the sighting it would have stamped is noted in the `SeenRecorder`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from control_plane.accounts.services import AGENT_OF_CREDENTIAL, HOST_SEEN_EVERY
from control_plane.agent_scope import unknown_agent
from control_plane.answers_cache import AnswerMemory, SeenRecorder
from control_plane.host_sightings import stamp_hosts
from control_plane.poll_word import NOTHING_SAID, PollWord
from control_plane.releases.services import release_view
from control_plane.rollout.config import (
    PERSONAL_OFFER_COLUMNS,
    TRACK_CTE,
    UPDATER_OFFER_COLUMNS,
    UPDATER_OFFER_JOIN,
    needs_personal_offer,
    with_personal_offer,
    with_updater_offer,
)
from control_plane.types import Pool
from ground.contract import (
    CONTRACT_VERSION,
    AgentConfig,
    BrakeView,
    HoldView,
    ManualUpdateView,
    OfferNote,
    OfferReason,
    ReleaseTrack,
    ScheduleView,
)

__all__ = [
    "STRETCH_GAP",
    "AgentConfigService",
    "VersionedConfig",
    "offer_note",
]

# `last_seen_at` is refreshed at most this often, so a fleet polling every minute does not write a
# row per request.
LAST_SEEN_RESOLUTION = timedelta(seconds=30)
# Polls further apart than this end a stretch of sightings (an agent polls every minute, and
# `last_seen_at` lags by up to LAST_SEEN_RESOLUTION).
STRETCH_GAP = timedelta(minutes=3)


@dataclass(frozen=True, kw_only=True)
class VersionedConfig:
    """The config without its `server_time`, its ETag, and whose it is."""

    timeless: AgentConfig
    etag: str
    agent_id: UUID
    org_id: UUID

    def at(self, now: datetime) -> AgentConfig:
        """The answer as sent at `now`."""
        return self.timeless.model_copy(update={"server_time": now})


# One statement: the `last_seen_at` stamp (a data-modifying CTE, its own autocommit transaction)
# and everything the config is made of — the agent, the platform's settings and brake, the current
# release of the (channel, platform) it follows, a pending manual update. The poll every agent
# sends every minute is one round trip.
# The settings, brake, releases and runs are other domains' tables, read here as the claims' hot
# path reads them: for the hot path, one statement beats one call per domain.
_CONFIG = """
WITH seen AS (
    -- `online_since` / `previous_seen_at`: the current and the previous stretch of polls, so the
    -- worker judges whether the agent was reachable within a window, not at pass time (the same
    -- rule as the sightings of polls answered from memory, `answers_cache.seen`).
    -- The trust root the agent says it holds rides along, written only when it changed (or with
    -- a sighting that is due anyway).
    UPDATE agents SET last_seen_at = CASE WHEN {due} THEN %(now)s ELSE last_seen_at END,
           online_since = CASE WHEN NOT {due} THEN online_since
                               WHEN last_seen_at IS NULL OR last_seen_at < %(stretch_gap)s
                                    OR last_seen_at > %(now)s OR online_since IS NULL
                               THEN %(now)s ELSE online_since END,
           previous_seen_at = CASE WHEN {due} AND last_seen_at < %(stretch_gap)s
                                   THEN last_seen_at ELSE previous_seen_at END,
           trust_root_version = coalesce(%(held)s::integer, trust_root_version)
     WHERE id = {agent}
       AND ({due} OR trust_root_version IS DISTINCT FROM coalesce(%(held)s::integer,
                                                                  trust_root_version))
), host AS (
    -- The host that answers for this identity, at most once an hour per host: one credential
    -- answered by two hosts shows on the agent page (an agent enrolled twice).
{stamp_host}
), clock_off AS (
    -- The host's clock, when the poll said it and it is further off than the agent follows
    -- (`poll_word.host_clock_off`); a clock that agrees, or a poll without `Date`,
    -- removes what was kept.
    INSERT INTO agent_clocks (agent_id, offset_seconds, measured_at)
    SELECT {agent}, %(clock_off)s::bigint, %(now)s
     WHERE %(clock_off)s::bigint IS NOT NULL AND {agent} IS NOT NULL
    ON CONFLICT (agent_id) DO UPDATE
       SET offset_seconds = EXCLUDED.offset_seconds, measured_at = EXCLUDED.measured_at
), clock_agrees AS (
    DELETE FROM agent_clocks WHERE %(clock_agrees)s AND agent_id = {agent}
){track}
SELECT a.id, a.org_id, a.name, a.update_schedule_enabled, a.update_schedule_times,
       s.timezone, s.catch_up_minutes, b.engaged AS brake_engaged, b.reason AS brake_reason,
       rel.agent_version, rel.manifest_version, rel.channel, rel.platform,
       (rel.braked_at IS NOT NULL) AS release_braked, rel.brake_reason AS release_brake_reason,
       (halt.id IS NOT NULL) AS release_halted, halt.reason AS halt_reason,
       manual.id AS manual_run_id, manual.created_at AS manual_requested_at,
       (SELECT max(version) FROM trust_roots) AS trust_root_version,
       {offer}, {updater}
  FROM agents a
 CROSS JOIN platform_settings s
 CROSS JOIN platform_brake b
  LEFT JOIN current_releases cur
         ON cur.channel = %(channel)s AND cur.platform = %(platform)s
  LEFT JOIN releases rel ON rel.id = cur.release_id{updater_join}
  LEFT JOIN release_halts halt ON halt.release_id = rel.id AND halt.resumed_at IS NULL
  LEFT JOIN LATERAL (
        SELECT r.id, r.created_at FROM runs r
         WHERE r.agent_id = a.id AND r.trigger = 'manual' AND r.status IN ('requested', 'claimed')
         ORDER BY r.created_at DESC LIMIT 1
       ) manual ON true
 WHERE a.id = {agent}
"""
# A sighting is due when the last one is older than LAST_SEEN_RESOLUTION (or in the future: a clock
# put back).
_SIGHTING_DUE = "(last_seen_at IS NULL OR last_seen_at <= %(stale)s OR last_seen_at > %(now)s)"
# The host's sighting is due when the last one is older than HOST_SEEN_EVERY (or in the future).
_HOST_SIGHTING = """
    SELECT {agent}, %(host_id)s::text, %(now)s, %(now)s
     WHERE %(host_id)s::text IS NOT NULL AND {agent} IS NOT NULL
       AND NOT EXISTS (
           SELECT 1 FROM agent_hosts h
            WHERE h.agent_id = {agent} AND h.host_id = %(host_id)s::text
              AND h.last_seen_at > %(host_stale)s AND h.last_seen_at <= %(now)s)
"""


def _config_of(agent: str) -> str:
    """The config statement for the agent that the SQL expression `agent` names."""
    return _CONFIG.format(
        due=_SIGHTING_DUE,
        agent=agent,
        stamp_host=stamp_hosts(_HOST_SIGHTING.format(agent=agent)),
        offer=PERSONAL_OFFER_COLUMNS,
        track=TRACK_CTE.format(agent=agent),
        updater=UPDATER_OFFER_COLUMNS,
        updater_join=UPDATER_OFFER_JOIN,
    )


_CONFIG_BY_ID = _config_of("%(agent_id)s")
_CONFIG_BY_CREDENTIAL = _config_of(f"({AGENT_OF_CREDENTIAL})")


def _config_key(secret_sha256: str, track: ReleaseTrack) -> tuple[str, ...]:
    """Where the memory keeps the config answered to a credential for one track: the same key
    to remember it and to recall it."""
    return ("config", secret_sha256, track.channel, track.platform)


def seen_recorder() -> SeenRecorder:
    """The recorder for sightings answered from memory, at this service's resolutions."""
    return SeenRecorder(
        resolution=LAST_SEEN_RESOLUTION, host_every=HOST_SEEN_EVERY, stretch_gap=STRETCH_GAP
    )


class AgentConfigService:
    def __init__(
        self,
        pool: Pool,
        *,
        memory: AnswerMemory | None = None,
        seen: SeenRecorder | None = None,
    ) -> None:
        self._pool = pool
        self._memory = memory or AnswerMemory()
        self._seen = seen or seen_recorder()

    def remembered(
        self,
        secret_sha256: str,
        track: ReleaseTrack,
        now: datetime,
        word: PollWord,
    ) -> VersionedConfig | None:
        """`config_as` from memory, without the database (None: not remembered, or the memory
        is not live); the sighting and the poll's `word` are noted for the feed's thread to
        write."""
        found = self._memory.recall(_config_key(secret_sha256, track), now=now)
        if not isinstance(found, VersionedConfig):
            return None
        self._seen.saw(found.agent_id, now, word)
        return found

    def config(
        self,
        agent_id: UUID,
        track: ReleaseTrack,
        now: datetime,
        word: PollWord = NOTHING_SAID,
    ) -> VersionedConfig:
        """The agent's config at `now` (the server's clock) with the release of `track`, and
        records that the agent was seen with what its poll said (`word`: the host answering
        for it, the trust root it holds, how far off its host's clock is)."""
        found = self._config(_CONFIG_BY_ID, {"agent_id": agent_id}, track, now, word)
        if found is None:
            raise unknown_agent(agent_id)
        return found

    def config_as(
        self,
        secret_sha256: str,
        track: ReleaseTrack,
        now: datetime,
        word: PollWord,
    ) -> VersionedConfig | None:
        """`config` for the agent behind a presented credential, found in the same statement;
        None when no agent has that valid credential. Remembered when the memory is live."""
        stamp = self._memory.stamp()  # before the read: a change applied meanwhile wins
        found = self._config(
            _CONFIG_BY_CREDENTIAL, {"secret_sha256": secret_sha256}, track, now, word
        )
        if found is not None and stamp is not None:
            self._seen.stamped(found.agent_id, now, word)
            self._memory.remember(
                _config_key(secret_sha256, track),
                found,
                agent_id=found.agent_id,
                org_id=found.org_id,
                stamp=stamp,
            )
        return found

    def _config(
        self,
        statement: str,
        agent: dict[str, object],
        track: ReleaseTrack,
        now: datetime,
        word: PollWord,
    ) -> VersionedConfig | None:
        parameters = {
            "held": word.held,
            "clock_off": word.clock if word.clock_off else None,
            # A poll without `Date` (a release before contract 6) keeps no disagreement either.
            "clock_agrees": word.says_clock and not word.clock_off,
            **agent,
            "channel": track.channel,
            "platform": track.platform,
            "now": now,
            "stale": now - LAST_SEEN_RESOLUTION,
            "stretch_gap": now - STRETCH_GAP,
            "host_id": word.host_id,
            "host_stale": now - HOST_SEEN_EVERY,
        }
        with self._pool.connection() as conn:
            row = conn.execute(statement, parameters).fetchone()
            if row is None:
                return None
            newest = row["agent_version"]
            if needs_personal_offer(row):
                # A pin, a hold or a canary stage: the agent's own offer.
                row = with_personal_offer(conn, row, track, now)
            row = with_updater_offer(conn, row, track)
        note = offer_note(row, newest=newest)
        timeless, etag = _timeless_config(
            row["id"],
            row["org_id"],
            row["name"],
            row["update_schedule_enabled"],
            tuple(row["update_schedule_times"]),
            row["timezone"],
            row["catch_up_minutes"],
            row["brake_engaged"],
            row["brake_reason"],
            track,
            row["agent_version"],
            row["manifest_version"],
            row["channel"],
            row["platform"],
            row["manual_run_id"],
            row["manual_requested_at"],
            row.get("hold_until"),
            row.get("hold_reason"),
            row.get("hold_set_by"),
            note,
            row["trust_root_version"],
            row["updater_version_offered"],
            row["updater_manifest_version"],
        )
        return VersionedConfig(
            timeless=timeless, etag=etag, agent_id=row["id"], org_id=row["org_id"]
        )


# A pure function of the row, remembered: a fleet polls an unchanged config every minute, and
# building, dumping and hashing it was most of a 304's own work. Any changed value (the pair
# included, so each pair has its own ETag) is another key, so nothing stale can come back; the
# size covers a large fleet's distinct configs.
@functools.lru_cache(maxsize=65_536)
def _timeless_config(
    agent_id: UUID,
    org_id: UUID,
    name: str,
    enabled: bool,
    times: tuple[str, ...],
    timezone: str,
    catch_up_minutes: int,
    brake_engaged: bool,
    brake_reason: str | None,
    track: ReleaseTrack,
    release_version: str | None,
    manifest_version: int | None,
    channel: str | None,
    platform: str | None,
    manual_run_id: UUID | None,
    manual_requested_at: datetime | None,
    hold_until: datetime | None = None,
    hold_reason: str | None = None,
    hold_set_by: str | None = None,
    note: OfferNote | None = None,
    trust_root_version: int | None = None,
    updater_version: str | None = None,
    updater_manifest_version: int | None = None,
) -> tuple[AgentConfig, str]:
    timeless = AgentConfig(
        agent_id=agent_id,
        org_id=org_id,
        name=name,
        schedule=ScheduleView(enabled=enabled, times=times),
        timezone=timezone,
        catch_up_minutes=catch_up_minutes,
        brake=BrakeView(engaged=brake_engaged, reason=brake_reason),
        track=track,
        release=None
        if release_version is None
        else release_view(
            {
                "agent_version": release_version,
                "manifest_version": manifest_version,
                "channel": channel,
                "platform": platform,
            }
        ),
        manual_update=None
        if manual_run_id is None
        else ManualUpdateView(run_id=manual_run_id, requested_at=manual_requested_at),
        hold=None
        if hold_until is None
        else HoldView.model_validate(
            {"until": hold_until, "reason": hold_reason, "set_by": hold_set_by}
        ),
        offer_note=note,
        trust_root_version=trust_root_version,
        contract_version=CONTRACT_VERSION,
        updater_release=None
        if updater_version is None
        else release_view(
            {
                "agent_version": updater_version,
                "manifest_version": updater_manifest_version,
                "channel": track.channel,
                "platform": track.platform,
            }
        ),
    )
    return timeless, _etag(timeless)


def offer_note(row: dict[str, Any], *, newest: str | None) -> OfferNote | None:
    """Why the agent is not updated to `newest` (its pair's newest release) now, from the config
    row with the agent's own offer in place: the first reason that holds, in `OfferReason`'s
    order. None when nothing stands in the way, or when nothing is published."""
    if newest is None:
        return None
    offered = row["agent_version"]
    found: tuple[OfferReason, str | None] | None = None
    if row["pinned"] and offered != newest:
        found = (OfferReason.PINNED, None)
    elif row.get("hold_until") is not None:
        found = (OfferReason.HELD, row.get("hold_reason"))
    elif row["release_halted"]:
        found = (OfferReason.HALTED, row["halt_reason"])
    elif row["release_braked"]:
        found = (OfferReason.BRAKED, row["release_brake_reason"])
    elif row["brake_engaged"]:
        found = (OfferReason.BRAKED, row["brake_reason"])
    elif offered != newest:
        # Not pinned, not stopped, and yet another release: the newest has not reached this
        # agent in its rollout (a stage or a wave before it).
        found = (OfferReason.WAVE, None)
    if found is None:
        return None
    reason, detail = found
    return OfferNote(reason=reason, newest_version=newest, detail=detail)


def _etag(timeless: AgentConfig) -> str:
    # Not the contract's version: an agent polling replicas of two releases during an upgrade
    # would otherwise download the unchanged config at every switch between them.
    body = timeless.model_dump(mode="json", exclude={"server_time", "contract_version"})
    # Absent as an older replica leaves it: with no updater release published, both answer the
    # same ETag.
    if body.get("updater_release") is None:
        body.pop("updater_release", None)
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return '"' + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32] + '"'
