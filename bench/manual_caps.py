"""What a full round costs when a bulk "Update now" asks again every minute: a manual claim
refused by a cap, beside a scheduled claim refused by a cap, in one run on one database.

While an organisation's round is full, every agent with a pending update now claims it again at
its next minute; each of those claims is refused `org_cap`. This measures that refusal (the
claims service's manual path: one read without a lock, `claims.manual`) against the scheduled
claim's refusal on the database path (the hot statement and the offer's reads; the answers'
memory, which spares most scheduled refusals the database, is not used by either), in turns:
`--rounds` rounds, each refusing every agent once the scheduled way and once the manual way, so
both see the same machine. No HTTP: the two paths differ only below the route.

Set-up (not measured): an embedded PostgreSQL in a temporary folder, migrated; `--agents` agents
in `--orgs` organisations (`bench.herd.seed`), each with a pending update now; every
organisation's counter and the platform's for the round filled to its cap.

    PYTHONPATH=. .venv/bin/python bench/manual_caps.py [--agents 2000] [--orgs 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from uuid import UUID

from bench.herd import SLOT_AT, SLOT_KEY, Agent, seed
from control_plane.claims.manual import CAPPED_MANUAL_CONTRACT
from control_plane.database import open_pool
from control_plane.errors import ClaimRefused
from control_plane.registry import Services, build_services
from control_plane.types import Pool
from ground.contract import ClaimRequest, RefusalCode, ReleaseTrack
from nachtwacht.demo_world.databases import EmbeddedDatabase
from tests.worlds.releases import ReleaseFactory

# Half a minute into the 03:00 slot's round: the window is open and the round is full.
NOW = SLOT_AT + timedelta(seconds=30)


def _fill_the_round(pool: Pool, services: Services, agents: list[Agent]) -> dict[str, UUID]:
    """A pending update now for every agent (agent id → its run), and the round full."""
    runs: dict[str, UUID] = {}
    with pool.connection() as conn:
        caps = conn.execute("SELECT org_cap, global_cap FROM platform_settings").fetchone()
        assert caps is not None
        for org_id in sorted({agent.org_id for agent in agents}):
            conn.execute(
                "INSERT INTO claim_rounds_org (round_start, org_id, granted) VALUES (%s, %s, %s)",
                [SLOT_AT, UUID(org_id), caps["org_cap"]],
            )
        conn.execute(
            "INSERT INTO claim_rounds_global (round_start, granted) VALUES (%s, %s)",
            [SLOT_AT, caps["global_cap"]],
        )
    for org_id in sorted({agent.org_id for agent in agents}):
        members = [UUID(agent.agent_id) for agent in agents if agent.org_id == org_id]
        services.runs.request_manual_updates(UUID(org_id), members, None, now=SLOT_AT)
    with pool.connection() as conn:
        for row in conn.execute(
            "SELECT id, agent_id FROM runs WHERE trigger = 'manual' AND status = 'requested'"
        ).fetchall():
            runs[str(row["agent_id"])] = row["id"]
    return runs


def _refuse_all(agents: list[Agent], claim: Callable[[Agent], object]) -> float:
    """Seconds to have every agent refused once; every answer must be a cap's refusal."""
    began = time.perf_counter()
    for agent in agents:
        try:
            claim(agent)
        except ClaimRefused as refused:
            if refused.refusal not in {RefusalCode.ORG_CAP, RefusalCode.GLOBAL_CAP}:
                raise
        else:
            raise AssertionError(f"agent {agent.agent_id} was granted in a full round")
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--orgs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="nachtwacht-manual-caps-"))
    home.chmod(0o755)  # the embedded server runs as its own user when the bench runs as root
    embedded = EmbeddedDatabase(home / "db")
    try:
        url = embedded.start()
        agents = seed(url, args.agents, args.orgs, home)
        pool = open_pool(url, min_size=1, max_size=2)
        try:
            services = build_services(pool, ReleaseFactory(workdir=home).trusted)
            runs = _fill_the_round(pool, services, agents)

            def scheduled(agent: Agent) -> object:
                return services.claims.claim_slot(
                    UUID(agent.agent_id),
                    SLOT_KEY,
                    "1.4.1",
                    NOW,
                    track=ReleaseTrack(channel=agent.pair[0], platform=agent.pair[1]),
                )

            def manual(agent: Agent) -> object:
                request = ClaimRequest(
                    manual_run_id=runs[agent.agent_id],
                    from_version="1.4.1",
                    channel=agent.pair[0],
                    platform=agent.pair[1],
                )
                return services.claims.claim(
                    UUID(agent.agent_id), request, NOW, agent_contract=CAPPED_MANUAL_CONTRACT
                )

            _refuse_all(agents[:50], scheduled)  # warm both paths (not counted)
            _refuse_all(agents[:50], manual)
            ratios = []
            per_refusal: dict[str, list[float]] = {"scheduled": [], "manual": []}
            for n in range(args.rounds):
                took_scheduled = _refuse_all(agents, scheduled)
                took_manual = _refuse_all(agents, manual)
                per_refusal["scheduled"].append(took_scheduled / len(agents) * 1000)
                per_refusal["manual"].append(took_manual / len(agents) * 1000)
                ratios.append(took_manual / took_scheduled)
                print(
                    f"round {n + 1}: scheduled cap refusal {per_refusal['scheduled'][-1]:.3f} ms,"
                    f" manual cap refusal {per_refusal['manual'][-1]:.3f} ms,"
                    f" manual/scheduled {ratios[-1]:.2f}"
                )
            with pool.connection() as conn:
                written = conn.execute(
                    "SELECT (SELECT count(*) FROM tokens) AS tokens,"
                    " (SELECT count(*) FROM runs WHERE status <> 'requested') AS runs"
                ).fetchone()
            assert written is not None
            print(
                f"{len(agents)} agents in {args.orgs} organisations, {args.rounds} rounds:"
                f" scheduled {statistics.median(per_refusal['scheduled']):.3f} ms a refusal,"
                f" manual {statistics.median(per_refusal['manual']):.3f} ms a refusal (medians);"
                f" manual/scheduled median {statistics.median(ratios):.2f}"
                f" (range {min(ratios):.2f}-{max(ratios):.2f});"
                f" written by the refusals: {written['tokens']} tokens,"
                f" {written['runs']} runs claimed"
            )
        finally:
            pool.close()
    finally:
        embedded.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
