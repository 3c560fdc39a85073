"""What last month's agents read: this control plane's answers, to the requests of an agent of
the previous release (no contract header, no `Date`: it is from before both), read by that
release's own code — its `wire` readers and its contract's models, from `git archive` of the
commit in `tests/rolling/previous_release.txt` — in every state the night can be in: a plain
poll, the brake, a hold by its customer or by its host, a halted release, a full round, an
update now, a claim granted, confirmed and reported. Real HTTP over loopback, a real database.

An answer the previous release cannot read, or a refusal whose code it does not know, leaves an
agent in a customer's network unable to plan or to stop: each is listed by name."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from control_plane.registry import Services
from nachtwacht.demo_world.children import Subprocesses
from tests.control_plane.api.conftest import AT_0301_SHARP, SLOT
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.rolling.previous_release import extract
from tests.worlds.clocks import ManualClock

pytestmark = pytest.mark.slow

# Run by the previous release's interpreter path: each answer read as its agent reads it.
_READER = r"""
import json, sys
from agent_daemon.connection import wire
from ground.contract import messages
found = []
for item in json.load(sys.stdin):
    name, status, body = item["name"], item["status"], item["body"].encode("utf-8")
    try:
        if item["read_as"] == "claim":
            read = wire.claim_answer(status, body)
        elif item["read_as"] == "confirm":
            read = wire.confirm_answer(status, body)
        elif item["read_as"] == "error":
            read = wire.error_detail(body)
            if read is None:
                found.append(f"{name}: {status} is no refusal it can read: {body[:300]!r}")
                continue
        else:
            model = getattr(messages, item["read_as"])
            read = model.model_validate(wire.read_json(body, source=name))
    except Exception as exc:
        found.append(f"{name}: {type(exc).__name__}: {str(exc)[:500]}")
        continue
    code = getattr(read, "code", None)
    if item.get("refusal") and getattr(read, "refusal", None) is None:
        found.append(f"{name}: refused with {code!r}, a code it does not know")
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def previous_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract(tmp_path_factory.mktemp("previous-release"))


class OldAgent:
    """An agent of the previous release: its key and host id, no contract header, no `Date`."""

    def __init__(self, api: Api, agent: Agent) -> None:
        self.api = api
        self.agent = agent
        self.answers: list[dict[str, Any]] = []

    def send(
        self, name: str, read_as: str, method: str, path: str, body: Any = None, **kw: Any
    ) -> httpx.Response:
        headers = {
            "Authorization": f"Bearer {self.agent.agent_key}",
            "X-Nachtwacht-Host-Id": "host-0001",
        }
        with httpx.Client(base_url=self.api.base_url, timeout=30) as client:
            answer = client.request(method, path, headers=headers, json=body)
        self.answers.append(
            {
                "name": name,
                "read_as": read_as,
                "status": answer.status_code,
                "body": answer.text,
                "refusal": kw.get("refusal", False),
            }
        )
        return answer


def _read_by_the_previous_release(tree: Path, answers: list[dict[str, Any]]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _READER],
        input=json.dumps(answers),
        env=Subprocesses(checkout=tree).environment(),
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout)
    return found


@pytest.fixture
def old_agents(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> Iterator[Callable[[str], tuple[Org, OldAgent]]]:
    del published

    def make(name: str) -> tuple[Org, OldAgent]:
        org = make_org(name)
        return org, OldAgent(api, make_agent(org, "web-01"))

    yield make
    clock.set(AT_0301_SHARP)


CLAIM = {"slot_key": SLOT, "from_version": "1.4.1"}


def test_the_previous_releases_agent_reads_every_answer_of_the_night(
    api: Api,
    services: Services,
    clock: ManualClock,
    operator_key: str,
    previous_tree: Path,
    old_agents: Callable[[str], tuple[Org, OldAgent]],
) -> None:
    clock.set(AT_0301_SHARP)
    everyone: list[OldAgent] = []

    def operator(method: str, path: str, body: Any = None) -> httpx.Response:
        with api.client(operator_key) as client:
            answer = client.request(method, path, json=body)
        assert answer.status_code < 300, (path, answer.text)
        return answer

    # A plain night: polled, claimed, confirmed, reported.
    _, plain = old_agents("Plain")
    everyone.append(plain)
    plain.send("config", "AgentConfig", "GET", "/v1/agent/config")
    granted = plain.send("claim granted", "claim", "POST", "/v1/agent/claims", CLAIM)
    assert granted.status_code == 201, granted.text
    run_id = granted.json()["run_id"]
    plain.send("claim again", "claim", "POST", "/v1/agent/claims", CLAIM)
    plain.send("confirm", "confirm", "POST", f"/v1/agent/runs/{run_id}/confirm")
    report = {"status": "succeeded", "version": "1.5.0", "switched_at": "2026-11-30T02:02:00Z"}
    reported = plain.send("report", "error", "PATCH", f"/v1/agent/runs/{run_id}", report)
    assert reported.status_code == 200, reported.text
    plain.answers.pop()  # taken: the agent reads nothing more of it

    # The host's own hold, and its customer's.
    _, host_held = old_agents("Host held")
    everyone.append(host_held)
    until = "2026-12-02T08:00:00Z"
    host_held.send(
        "host hold", "HoldView", "PUT", "/v1/agent/hold", {"until": until, "reason": "patching"}
    )
    host_held.send("config held by host", "AgentConfig", "GET", "/v1/agent/config")
    host_held.send("claim held", "claim", "POST", "/v1/agent/claims", CLAIM, refusal=True)
    customer_org, customer_held = old_agents("Customer held")
    everyone.append(customer_held)
    with api.client(customer_org.panel_key) as panel:
        held = panel.put(
            f"/v1/agents/{customer_held.agent.agent_id}/hold",
            json={"until": until, "reason": "quarter's end"},
        )
    assert held.status_code < 300, held.text
    customer_held.send("config held by customer", "AgentConfig", "GET", "/v1/agent/config")

    # A full round: the organisation's cap of one taken by another agent first.
    operator("PUT", "/v1/admin/settings", {"org_cap": 1})
    capped_org, capped = old_agents("Capped")
    everyone.append(capped)
    first = OldAgent(api, _make_agent(services, clock, capped_org, "web-00"))
    assert first.send("first", "claim", "POST", "/v1/agent/claims", CLAIM).status_code == 201
    capped.send("claim in a full round", "claim", "POST", "/v1/agent/claims", CLAIM, refusal=True)

    # Update now, asked by the host.
    _, manual = old_agents("Manual")
    everyone.append(manual)
    asked = manual.send("update now", "ManualUpdateView", "POST", "/v1/agent/manual-updates")
    assert asked.status_code < 300, asked.text
    manual.send("config with an update now", "AgentConfig", "GET", "/v1/agent/config")
    manual.send(
        "manual claim",
        "claim",
        "POST",
        "/v1/agent/claims",
        {"manual_run_id": asked.json()["run_id"], "from_version": "1.4.1"},
    )

    # The release halted, then the brake.
    _, halted = old_agents("Halted")
    everyone.append(halted)
    release_id = next(
        str(entry.id)
        for track in services.releases.list().tracks
        for entry in track.releases
        if entry.version == "1.5.0"
    )
    operator("POST", f"/v1/admin/releases/{release_id}/halt", {"reason": "crashes on start"})
    halted.send("config halted", "AgentConfig", "GET", "/v1/agent/config")
    halted.send("claim halted", "claim", "POST", "/v1/agent/claims", CLAIM, refusal=True)
    operator("POST", f"/v1/admin/releases/{release_id}/resume", {"reason": "fixed upstream"})
    operator("PUT", "/v1/admin/brake", {"engaged": True, "reason": "incident 7"})
    _, braked = old_agents("Braked")
    everyone.append(braked)
    braked.send("config braked", "AgentConfig", "GET", "/v1/agent/config")
    braked.send("claim braked", "claim", "POST", "/v1/agent/claims", CLAIM, refusal=True)
    plain.send("confirm once ended", "confirm", "POST", f"/v1/agent/runs/{run_id}/confirm")

    answers = [answer for agent in everyone for answer in agent.answers]
    # Each state was reached: the refusals are the ones named, the rest were served.
    statuses = {answer["name"]: answer["status"] for answer in answers}
    assert statuses["claim held"] == 409 and statuses["claim halted"] == 409, statuses
    assert statuses["claim in a full round"] == 429 and statuses["claim braked"] == 503
    assert statuses["confirm once ended"] == 409, statuses
    assert _read_by_the_previous_release(previous_tree, answers) == []


def _make_agent(services: Services, clock: ManualClock, org: Org, name: str) -> Agent:
    from uuid import UUID

    issued = services.accounts.enroll_agent(UUID(org.org_id), name, now=clock.now())
    return Agent(agent_id=str(issued.agent_id), org_id=org.org_id, agent_key=issued.agent_key)


# What the previous release's agent may put in a report, at the edges of its own models: an error
# of 2,000 characters holding every kind of character it may have caught from a failing command
# (tab, newline, escape, NUL, a bidirectional control), a version of 100.
_ERROR = ("tar: \t\n\x1b[31m\x00\u202e " * 200)[:2000]
_VERSION = "1." + "9" * 98


@pytest.mark.parametrize(
    ("status", "reason", "switched"),
    [
        pytest.param("failed", "platform_unavailable", False, id="platform_unavailable"),
        pytest.param("failed", "interrupted", False, id="interrupted"),
        pytest.param("failed", "token_revoked", False, id="token_revoked"),
        pytest.param("failed", "token_expired", False, id="token_expired"),
        pytest.param("failed", "disk_full", False, id="disk_full"),
        pytest.param("failed", "download_failed", False, id="download_failed"),
        pytest.param("failed", "verification_failed", False, id="verification_failed"),
        pytest.param("failed", "install_failed", False, id="install_failed"),
        pytest.param("rolled_back", "health_check_failed", True, id="health_check_failed"),
        pytest.param("succeeded", None, True, id="succeeded"),
    ],
)
def test_every_report_the_previous_releases_agent_sends_is_taken(
    api: Api,
    pool: Any,
    clock: ManualClock,
    old_agents: Callable[[str], tuple[Org, OldAgent]],
    status: str,
    reason: str | None,
    switched: bool,
) -> None:
    """Each outcome reason the previous release knows, with the widest text it may send: taken
    (200) and kept (its text inert, cut within its bound), never refused by a bound this release
    added."""
    clock.set(AT_0301_SHARP)
    _, agent = old_agents("Acme")
    granted = agent.send(
        "claim", "claim", "POST", "/v1/agent/claims", {**CLAIM, "from_version": _VERSION}
    )
    assert granted.status_code == 201, granted.text
    run_id = granted.json()["run_id"]
    report: dict[str, Any] = {"status": status, "version": _VERSION, "error": _ERROR}
    if reason is not None:
        report["reason"] = reason
    if switched:
        report["switched_at"] = "2026-11-30T02:01:30Z"
    taken = agent.send("report", "error", "PATCH", f"/v1/agent/runs/{run_id}", report)
    assert taken.status_code == 200, taken.text[:2000]
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT status, outcome_reason, version, error FROM runs WHERE id = %s",
            [run_id],
        ).fetchone()
    assert (row["status"], row["outcome_reason"], row["version"]) == (status, reason, _VERSION)
    # Kept inert, each control character as its escape, within the message's bound.
    assert row["error"].startswith("tar: \t\n\\u001b[31m\\u0000\\u202e tar: "), row["error"]
    assert len(row["error"]) <= 2000


def test_the_previous_releases_already_up_to_date_is_taken(
    clock: ManualClock, old_agents: Callable[[str], tuple[Org, OldAgent]]
) -> None:
    clock.set(AT_0301_SHARP)
    _, agent = old_agents("Acme")
    body = {"slot_key": SLOT, "status": "up_to_date", "version": _VERSION}
    taken = agent.send("nothing to do", "error", "POST", "/v1/agent/runs", body)
    assert taken.status_code in (200, 201), taken.text[:2000]
