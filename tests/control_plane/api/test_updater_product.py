"""Nachtwacht's own agent (the updater) as a product line of its own, over real HTTP.

Its releases are signed with `product: updater`, stored beside the managed agent's, offered apart
in the config (`updater_release`) and claimed through the same slot and caps (`product` in the
claim). The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, sign_release
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"
# The managed agent's version and that of nachtwacht's own agent, as the host reported them.
_VERSIONS = (
    "SELECT uv.version AS updater_version, a.current_version FROM agents a"
    " LEFT JOIN agent_updater_versions uv ON uv.agent_id = a.id WHERE a.id = %s"
)


@pytest.fixture
def at_0301(clock: ManualClock) -> ManualClock:
    clock.set(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC))
    return clock


def _publish(api: Api, operator_key: str, release: SignedRelease, **extra: Any) -> httpx.Response:
    with api.client(operator_key) as client:
        return client.post(
            "/v1/admin/releases",
            json={
                "manifest_b64": base64.b64encode(release.manifest).decode(),
                "signature_b64": base64.b64encode(release.signature).decode(),
                "artifact_b64": base64.b64encode(release.artifact).decode(),
                **extra,
            },
        )


def _updater(
    key: Ed25519PrivateKey, version: str = "2.1.0", manifest_version: int = 50
) -> SignedRelease:
    return sign_release(key, version=version, manifest_version=manifest_version, product="updater")


def _claim(api: Api, agent: Agent, **extra: Any) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post("/v1/agent/claims", json={"slot_key": SLOT, **extra})


def _config(api: Api, agent: Agent) -> dict[str, Any]:
    with api.client(agent.agent_key) as client:
        answer = client.get("/v1/agent/config")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_an_updater_release_is_offered_beside_the_agents_own_release(
    api: Api,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    before = _config(api, agent)
    assert before["updater_release"] is None

    answer = _publish(api, operator_key, _updater(release_key))
    assert answer.status_code == 201, answer.text
    assert answer.json()["product"] == "updater"
    # The pair's first updater release: the agent's 1.5.0 stays what the pair is offered.
    after = _config(api, agent)
    assert after["release"]["version"] == "1.5.0"
    assert after["updater_release"] == {
        "version": "2.1.0",
        "manifest_version": 50,
        "channel": "stable",
        "platform": "linux-x86_64",
    }


def test_an_updater_release_is_newer_only_than_the_updaters_own_releases(
    api: Api,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    published: SignedRelease,
) -> None:
    # The agent's 1.5.0 (manifest 42) does not make updater 1.0.0 a downgrade, nor 43 too old.
    answer = _publish(api, operator_key, _updater(release_key, "1.0.0", 43))
    assert answer.status_code == 201, answer.text
    older = _publish(api, operator_key, _updater(release_key, "1.1.0", 42))
    assert older.status_code == 409
    assert older.json()["detail"]["code"] == "release_not_newer"
    assert "updater release of stable/linux-x86_64" in older.json()["detail"]["message"]


@pytest.mark.parametrize(
    ("signed", "meant"), [("updater", "agent"), ("agent", "updater")], ids=["updater", "agent"]
)
def test_a_build_of_the_other_product_is_refused(
    api: Api, operator_key: str, release_key: Ed25519PrivateKey, signed: str, meant: str
) -> None:
    release = sign_release(release_key, product=signed)  # type: ignore[arg-type]
    answer = _publish(api, operator_key, release, product=meant)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail["code"] == "release_rejected"
    assert detail["message"].startswith(f"manifest.product: '{signed}' is not the product")
    # Named as what it is, it is published.
    assert _publish(api, operator_key, release, product=signed).status_code == 201


def test_a_manifest_naming_an_unknown_product_is_refused(
    api: Api, operator_key: str, release_key: Ed25519PrivateKey
) -> None:
    from signed_release.signature import sign_manifest

    release = sign_release(release_key)
    fields = json.loads(release.manifest)
    fields["product"] = "kernel"
    manifest = (json.dumps(fields, indent=2, sort_keys=True) + "\n").encode()
    forged = SignedRelease(
        manifest=manifest,
        signature=sign_manifest(manifest, release_key),
        artifact=release.artifact,
        version=release.version,
        manifest_version=release.manifest_version,
    )
    answer = _publish(api, operator_key, forged)
    assert answer.status_code == 422
    assert "product: 'kernel' is not a product" in answer.json()["detail"]["message"]


def test_a_self_update_is_claimed_through_the_slot_and_recorded_as_the_updaters(
    api: Api,
    pool: Pool,
    at_0301: ManualClock,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    updater = _updater(release_key)
    assert _publish(api, operator_key, updater).status_code == 201
    agent = make_agent(make_org())
    answer = _claim(api, agent, product="updater", from_version="2.0.0", updater_version="2.0.0")
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["product"] == "updater"
    assert body["release"]["version"] == "2.1.0"
    assert base64.b64decode(body["release"]["manifest_b64"]) == updater.manifest
    with pool.connection() as conn:
        run = conn.execute(
            "SELECT rel.product FROM runs r JOIN releases rel ON rel.id = r.release_id"
            " WHERE r.id = %s",
            [body["run_id"]],
        ).fetchone()
        held = conn.execute(_VERSIONS, [agent.agent_id]).fetchone()
    assert run is not None and run["product"] == "updater"
    assert held is not None and (held["updater_version"], held["current_version"]) == (
        "2.0.0",
        None,
    )
    # The slot carried the self-update: the managed agent's claim of it gets the same run back,
    # never a second update in the same slot.
    again = _claim(api, agent, from_version="1.4.1")
    assert again.status_code == 200
    assert again.json()["run_id"] == body["run_id"]


def test_self_updates_count_under_the_organisations_cap(
    api: Api,
    at_0301: ManualClock,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    with api.client(operator_key) as client:
        assert client.put("/v1/admin/settings", json={"org_cap": 1}).status_code == 200
    assert _publish(api, operator_key, _updater(release_key)).status_code == 201
    org = make_org()
    first, second = make_agent(org, "web-01"), make_agent(org, "web-02")
    assert _claim(api, first, product="updater", from_version="2.0.0").status_code == 201
    waits = _claim(api, second, product="updater", from_version="2.0.0")
    assert waits.status_code == 429, waits.text
    assert waits.json()["detail"]["code"] == "org_cap"
    # The managed agent's update is counted under the same cap.
    also_waits = _claim(api, second, from_version="1.4.1")
    assert also_waits.status_code == 429
    assert also_waits.json()["detail"]["code"] == "org_cap"


def test_no_updater_release_is_no_release_for_a_self_update(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    answer = _claim(api, agent, product="updater", from_version="2.0.0")
    assert answer.status_code == 409, answer.text
    assert answer.json()["detail"]["code"] == "no_release"


def _report(api: Api, agent: Agent, run_id: str, **body: Any) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.patch(f"/v1/agent/runs/{run_id}", json=body)


def test_a_self_update_rolled_back_is_recorded_with_the_old_daemons_reason(
    api: Api,
    pool: Pool,
    at_0301: ManualClock,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    assert _publish(api, operator_key, _updater(release_key)).status_code == 201
    agent = make_agent(make_org())
    run_id = _claim(api, agent, product="updater", from_version="2.0.0").json()["run_id"]
    at_0301.advance(minutes=2)
    answer = _report(
        api,
        agent,
        run_id,
        status="rolled_back",
        version="2.0.0",
        reason="health_check_failed",
        error="2.1.0 did not check in; 2.0.0 restored itself",
        switched_at="2026-11-30T02:02:00Z",
        updater_version="2.0.0",
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "rolled_back"
    with pool.connection() as conn:
        run = conn.execute(
            "SELECT r.status, r.outcome_reason, rel.product FROM runs r"
            " JOIN releases rel ON rel.id = r.release_id WHERE r.id = %s",
            [run_id],
        ).fetchone()
        held = conn.execute(_VERSIONS, [agent.agent_id]).fetchone()
        event = conn.execute(
            "SELECT data FROM events WHERE run_id = %s AND kind = 'update.rolled_back'", [run_id]
        ).fetchone()
    assert run is not None
    assert (run["status"], run["outcome_reason"], run["product"]) == (
        "rolled_back",
        "health_check_failed",
        "updater",
    )
    # The managed agent's version is not the updater's.
    assert held is not None and (held["updater_version"], held["current_version"]) == (
        "2.0.0",
        None,
    )
    assert event is not None and event["data"]["product"] == "updater"
    # It is not offered to this host again (its claim would take every slot from the managed
    # agent), while the managed agent's release still is.
    config = _config(api, agent)
    assert config["updater_release"] is None
    assert config["release"]["version"] == "1.5.0"
    # A claim of it all the same, at the next slot, is refused as rolled back.
    at_0301.set(datetime(2026, 12, 1, 2, 1, tzinfo=UTC))
    with api.client(agent.agent_key) as client:
        again = client.post(
            "/v1/agent/claims",
            json={"slot_key": "2026-12-01T03:00", "product": "updater", "from_version": "2.0.0"},
        )
    assert again.status_code == 409, again.text
    assert again.json()["detail"]["code"] == "release_rolled_back"


def test_metrics_count_agents_per_updater_version_and_self_update_outcomes(
    api: Api,
    at_0301: ManualClock,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    assert _publish(api, operator_key, _updater(release_key)).status_code == 201
    org = make_org()
    first, second = make_agent(org, "web-01"), make_agent(org, "web-02")
    run_id = _claim(
        api, first, product="updater", from_version="2.0.0", updater_version="2.0.0"
    ).json()["run_id"]
    at_0301.advance(minutes=2)
    assert (
        _report(
            api, first, run_id, status="succeeded", version="2.1.0", updater_version="2.1.0"
        ).status_code
        == 200
    )
    with api.client(second.agent_key) as client:
        assert (
            client.post(
                "/v1/agent/runs",
                json={
                    "slot_key": SLOT,
                    "status": "up_to_date",
                    "version": "1.5.0",
                    "updater_version": "2.0.0",
                },
            ).status_code
            == 201
        )
    with api.client(operator_key) as client:
        text = client.get("/metrics").text
    assert 'nachtwacht_agents_by_updater_version{version="2.0.0"} 1' in text
    assert 'nachtwacht_agents_by_updater_version{version="2.1.0"} 1' in text
    succeeded = [
        line
        for line in text.splitlines()
        if line.startswith("nachtwacht_self_update_outcomes_total{")
        and 'outcome="succeeded"' in line
    ]
    assert len(succeeded) == 1 and succeeded[0].endswith(" 1"), succeeded
    assert 'version="2.1.0"' in succeeded[0]
    # The updater release is not among the managed agent's release series.
    assert not any(
        line.startswith("nachtwacht_release_outcomes_total{") and 'version="2.1.0"' in line
        for line in text.splitlines()
    )


def test_a_manifest_version_the_other_products_release_took_is_refused_by_name(
    api: Api, operator_key: str, release_key: Ed25519PrivateKey, published: SignedRelease
) -> None:
    # The agent's 1.5.0 is manifest_version 42 of stable/linux-x86_64.
    answer = _publish(api, operator_key, _updater(release_key, "2.1.0", 42))
    assert answer.status_code == 409, answer.text
    assert answer.json()["detail"]["message"].startswith(
        "manifest_version: 42 is already the manifest_version of release 1.5.0 of "
        "stable/linux-x86_64"
    )
