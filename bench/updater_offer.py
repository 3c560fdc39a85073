"""What offering nachtwacht's own agent (the updater) costs the config poll read from the database.

The config poll is one statement (`control_plane.agent_config.services`); the updater's offer is
joined into it, and only an updater release in its canary stage costs the agent's own offer (a few
more queries, as the managed agent's canary does). Measured in one run on an embedded PostgreSQL
with `--agents` agents, in `--rounds` rounds of three kinds taken in turn, each `--polls` polls of
agents taken round robin, through `AgentConfigService.config` (the database path; the memory that
answers most polls in production is left out on purpose):

1. `no updater release`: the baseline, the statement as every poll runs it before the first
   updater release is published;
2. `updater, everyone`: an updater release current for the pair, at the `everyone` stage;
3. `updater, canary`: the same release in its canary stage (the agent's own offer is read).

The kinds switch by moving the pair's updater pointer (`current_updater_releases`) and the
release's stage between runs; the table gives each kind's mean µs per poll over all its runs and
its ratio to the baseline, with the range of the per-round ratios.

    PYTHONPATH=. .venv/bin/python bench/updater_offer.py [--agents 2000] [--orgs 50]
        [--polls 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

from control_plane.database import open_pool
from control_plane.registry import build_services
from ground.contract import DEFAULT_TRACK
from nachtwacht.demo_world.databases import EmbeddedDatabase
from tests.worlds.releases import ReleaseFactory

KINDS = ("no updater release", "updater, everyone", "updater, canary")
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--orgs", type=int, default=50)
    parser.add_argument("--polls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nachtwacht-bench-") as scratch:
        embedded = EmbeddedDatabase(Path(scratch) / "pg")
        url = embedded.start()
        try:
            return _measure(url, Path(scratch), args)
        finally:
            embedded.stop()


def _measure(url: str, scratch: Path, args: argparse.Namespace) -> int:
    factory = ReleaseFactory(workdir=scratch / "releases", issued_at=NOW - timedelta(days=1))
    pool = open_pool(url, min_size=1, max_size=2)
    try:
        services = build_services(pool, factory.trusted)
        artifact = b"\0" * 4096
        for version, manifest_version, product in [("1.5.0", 1, "agent"), ("2.1.0", 2, "updater")]:
            release = factory.sign(
                artifact,
                version=version,
                manifest_version=manifest_version,
                unpacked_size=len(artifact),
                expires_in=timedelta(days=365),
                product=product,  # type: ignore[arg-type]
            )
            services.releases.publish(
                release.manifest_bytes, release.signature, release.artifact, now=NOW
            )
        orgs = [services.accounts.create_org(f"org-{n}", now=NOW).org_id for n in range(args.orgs)]
        agents: list[UUID] = [
            services.accounts.enroll_agent(orgs[n % len(orgs)], f"agent-{n}", now=NOW).agent_id
            for n in range(args.agents)
        ]
        with pool.connection() as conn:
            pointer = conn.execute(
                "SELECT channel, platform, release_id FROM current_updater_releases"
            ).fetchone()
        assert pointer is not None
        # Three waves, so the canary stage is a real one.
        with pool.connection() as conn:
            conn.execute("DELETE FROM rollout_waves")
            conn.execute(
                "INSERT INTO rollout_waves (position, share_percent, soak_minutes)"
                " VALUES (1, 5, 60), (2, 50, 60), (3, 100, 60)"
            )

        def switch(kind: str) -> None:
            with pool.connection() as conn:
                conn.execute("DELETE FROM current_updater_releases")
                if kind != KINDS[0]:
                    conn.execute(
                        "INSERT INTO current_updater_releases VALUES (%s, %s, %s, %s)",
                        [pointer["channel"], pointer["platform"], pointer["release_id"], NOW],
                    )
                    stage = "canary" if kind == KINDS[2] else "everyone"
                    conn.execute(
                        "UPDATE releases SET stage = %s, wave = 1 WHERE id = %s",
                        [stage, pointer["release_id"]],
                    )

        def run(offset: int) -> float:
            started = time.perf_counter()
            for n in range(args.polls):
                services.agent_config.config(
                    agents[(offset + n) % len(agents)], DEFAULT_TRACK, NOW + timedelta(seconds=n)
                )
            return (time.perf_counter() - started) / args.polls * 1e6

        for kind in KINDS:  # warm-up, not counted
            switch(kind)
            run(0)
        per_kind: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for round_number in range(args.rounds):
            for kind in KINDS:
                switch(kind)
                per_kind[kind].append(run(round_number * args.polls))
        # The figures are of polls that did offer it.
        switch(KINDS[1])
        offered = services.agent_config.config(agents[0], DEFAULT_TRACK, NOW).timeless
        assert offered.updater_release is not None
    finally:
        pool.close()
    baseline = per_kind[KINDS[0]]
    print(
        f"config poll from the database, {args.agents} agents, {args.rounds} rounds x "
        f"{args.polls} polls per kind"
    )
    for kind in KINDS:
        times = per_kind[kind]
        mean = sum(times) / len(times)
        ratios = [t / b for t, b in zip(times, baseline, strict=True)]
        print(
            f"  {kind:20s} {mean:8.1f} µs/poll  ratio to baseline "
            f"{mean / (sum(baseline) / len(baseline)):.3f} "
            f"(per round {min(ratios):.3f}..{max(ratios):.3f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
