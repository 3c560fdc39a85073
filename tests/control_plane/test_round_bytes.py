"""The bytes each organisation's next round downloads: a patch for an agent whose reported version
the release has a stored patch from, the full build for the others, within one round of the
caps."""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from datetime import UTC, datetime
from uuid import UUID, uuid4

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.forecast.round_bytes import OrgRound, ReleaseSizes, Waiting, next_rounds
from control_plane.registry import Services
from control_plane.settings.services import PlatformSettings
from signed_release.manifest import parse_manifest
from signed_release.patch_offer import PatchOffer
from signed_release.signature import sign_manifest
from tests.control_plane.conftest import Api, sign_release
from tests.control_plane.reconcile_fleet import Fleet
from tests.worlds.clocks import ManualClock

# 03:00 in Amsterdam on 2026-11-30 (CET) is 02:00Z; the forecast is read an hour before.
SLOT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
BEFORE = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
RELEASE = uuid4()
SIZES = {RELEASE: ReleaseSizes(full=100_000, patches={"1.4.1": 1_000})}
CAPS = PlatformSettings(org_cap=5, global_cap=25)


def _waiting(org: UUID, version: str | None, agents: int, at: datetime = SLOT) -> Waiting:
    return Waiting(org_id=org, slot_at=at, version=version, release_id=RELEASE, agents=agents)


def test_the_round_takes_patches_for_the_agents_on_a_base_and_full_builds_for_the_others() -> None:
    acme = uuid4()
    rounds = next_rounds([_waiting(acme, "1.4.1", 6), _waiting(acme, "1.4.0", 4)], SIZES, CAPS)
    # Ten wait, the organisation's cap starts five: half the waiting agents' bytes.
    assert rounds == {
        acme: OrgRound(
            org_id=acme,
            at=SLOT,
            agents=10,
            starting=5,
            by_patch=6,
            expected_bytes=(6 * 1_000 + 4 * 100_000) // 2,
            full_bytes=10 * 100_000 // 2,
        )
    }


def test_an_agent_that_reported_no_version_takes_the_full_build() -> None:
    acme = uuid4()
    (only,) = next_rounds([_waiting(acme, None, 2)], SIZES, CAPS).values()
    assert (only.by_patch, only.expected_bytes, only.full_bytes) == (0, 200_000, 200_000)


def test_the_global_cap_is_shared_with_every_organisation_asking_at_the_same_instant() -> None:
    acme, globex = uuid4(), uuid4()
    rounds = next_rounds(
        [_waiting(acme, "1.4.1", 10), _waiting(globex, "1.4.0", 10)],
        SIZES,
        PlatformSettings(org_cap=5, global_cap=6),
    )
    assert (rounds[acme].starting, rounds[globex].starting) == (3, 3)
    assert (rounds[acme].expected_bytes, rounds[globex].expected_bytes) == (3_000, 300_000)


def test_an_organisations_next_round_is_its_first_slot() -> None:
    acme = uuid4()
    later = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
    rounds = next_rounds(
        [_waiting(acme, "1.4.0", 1, later), _waiting(acme, "1.4.1", 2)], SIZES, CAPS
    )
    assert (rounds[acme].at, rounds[acme].agents, rounds[acme].expected_bytes) == (SLOT, 2, 2_000)


# -- from the database ----------------------------------------------------------------------------

BASE_TAR = "cd" * 32
PATCH = b"a patch from 1.4.1" * 50


def _publish(services: Services, clock: ManualClock, key: Ed25519PrivateKey, *, store: bool) -> int:
    """1.5.0 signed with a patch from 1.4.1's tar, the patch stored with it or not; its length."""
    plain = sign_release(key)
    manifest = replace(
        parse_manifest(plain.manifest),
        tar_length=20_000,
        tar_sha256="12" * 32,
        patches=(
            PatchOffer(
                base_version="1.4.1",
                base_tar_length=19_000,
                base_tar_sha256=BASE_TAR,
                length=len(PATCH),
                sha256=hashlib.sha256(PATCH).hexdigest(),
            ),
        ),
    )
    data = manifest.to_bytes()
    services.releases.publish(
        data,
        sign_manifest(data, key),
        plain.artifact,
        now=clock.now(),
        patches={BASE_TAR: PATCH} if store else None,
    )
    return len(plain.artifact)


def _fleet_on(fleet: Fleet, org: UUID, versions: dict[str, str | None]) -> None:
    for name, version in versions.items():
        agent = fleet.agent(org, name)
        fleet.sql("UPDATE agents SET current_version = %s WHERE id = %s", [version, agent.id])


@pytest.mark.parametrize("store", [True, False], ids=["patch_stored", "patch_not_stored"])
def test_the_forecast_reads_each_agents_reported_version_and_the_stored_patches(
    fleet: Fleet, services: Services, clock: ManualClock, release_key: Ed25519PrivateKey,
    store: bool,
) -> None:  # fmt: skip
    full = _publish(services, clock, release_key, store=store)
    acme, globex = fleet.org("Acme"), fleet.org("Globex")
    _fleet_on(fleet, acme, {"a-1": "1.4.1", "a-2": "1.4.1", "a-3": "1.4.0", "a-4": "1.5.0"})
    _fleet_on(fleet, globex, {"g-1": None})
    held = fleet.agent(acme, "a-held")
    fleet.sql(
        "INSERT INTO holds (agent_id, until, set_by, set_at) VALUES (%s, %s, 'customer', %s)",
        [held.id, datetime(2026, 12, 30, tzinfo=UTC), BEFORE],
    )
    rounds = services.forecast.next_rounds(now=BEFORE)
    patch = len(PATCH) if store else full
    # The agent on 1.5.0 and the held one wait for nothing; three of Acme's start in the round.
    assert rounds[acme] == OrgRound(
        org_id=acme,
        at=SLOT,
        agents=3,
        starting=3,
        by_patch=2 if store else 0,
        expected_bytes=2 * patch + full,
        full_bytes=3 * full,
    )
    assert (rounds[globex].agents, rounds[globex].expected_bytes) == (1, full)
    assert services.forecast.next_rounds(now=BEFORE, org_id=globex) == {globex: rounds[globex]}


def test_the_customers_forecast_page_shows_the_next_rounds_download(
    api: Api, fleet: Fleet, services: Services, clock: ManualClock, release_key: Ed25519PrivateKey
) -> None:
    full = _publish(services, clock, release_key, store=True)
    issued = services.accounts.create_org("Acme", now=clock.now())
    _fleet_on(fleet, issued.org_id, {"a-1": "1.4.1", "a-2": "1.4.1", "a-3": "1.4.0"})
    clock.set(BEFORE)
    with httpx.Client(base_url=api.base_url, timeout=30) as client:
        form = client.get("/panel/sign-in")
        signed_in = client.post(
            "/panel/sign-in", data={"key": issued.panel_key, "csrf": _csrf(form.text)}
        )
        assert signed_in.status_code == 303, signed_in.text
        page = client.get("/panel/forecast")
    assert page.status_code == 200
    text = re.sub(r"<[^>]+>", " ", page.text)
    expected = round((2 * len(PATCH) + full) / 1_000, 1)
    assert "The next round, at" in text
    assert re.search(r"Agents waiting for an update\s+3\b", text), text
    assert re.search(r"Of them, with a patch from their version\s+2\b", text)
    assert re.search(rf"Expected download\s+{expected:g} kB", text), text


def _csrf(html: str) -> str:
    return html.split('name="csrf" value="', 1)[1].split('"', 1)[0]
