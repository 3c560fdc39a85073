"""The demo from start to end: set up, play the night, report, and leave nothing behind.

Everything that starts is registered on one `ExitStack` as it starts, so Ctrl-C, SIGTERM or a
failure at any step stops the daemons, the managed services, the control plane and the embedded
PostgreSQL and removes the demo's folder (unless `--keep`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import TextIO

from control_plane.settings.services import SettingsService
from ground.clock import FAKE_CLOCK_ENV, FakeClock
from nachtwacht.demo_night.errors import DemoFailed
from nachtwacht.demo_night.hosts import RealHost
from nachtwacht.demo_night.night import SIGNED_BEFORE_NIGHT, Night, night_of
from nachtwacht.demo_night.options import DemoOptions
from nachtwacht.demo_night.platform import ControlPlane, OrgAccount
from nachtwacht.demo_night.progress import (
    Snapshot,
    latest_served_agent,
    render_table,
    take_snapshot,
    unfinished_runs,
)
from nachtwacht.demo_night.report import (
    caps_lines,
    control_plane_timeline,
    daemon_timeline,
    journal_timeline,
    notification_lines,
    service_start_lines,
    timeline_lines,
)
from nachtwacht.demo_night.simulated import SimulatedAgent, SimulatedFleet
from nachtwacht.demo_night.terminal import LiveTable, Output
from nachtwacht.demo_world.artifact_server import artifact_server
from nachtwacht.demo_world.clocks import NightClock, showing_now
from nachtwacht.demo_world.hosts import AgentHost, preinstall, write_health_script
from nachtwacht.demo_world.release_tooling import SignedBuild, make_release_key, publish, sign_build
from nachtwacht.demo_world.supervisor import ServiceSupervisor
from signed_release.keys import load_public_keys

__all__ = ["run_demo"]

OLD_VERSION = "1.0.0"
NEW_VERSION = "1.1.0"
ORG_NAMES = (
    "Acme Logistics",
    "Borealis Bakery",
    "Corvid Labs",
    "Dune Freight",
    "Elm Clinics",
    "Fjord Energy",
    "Gull Harbour",
    "Heron Books",
)
BUDGET_SECONDS = 120.0
REFRESH_SECONDS = 0.5
INSTALL_WORKERS = 4


def _org_names(count: int) -> tuple[str, ...]:
    names = []
    for index in range(count):
        round_number, position = divmod(index, len(ORG_NAMES))
        names.append(ORG_NAMES[position] + (f" {round_number + 1}" if round_number else ""))
    return tuple(names)


class _Stopped(Exception):
    """SIGTERM: unwind like Ctrl-C so everything is cleaned up."""


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    del frame
    raise _Stopped(signal.Signals(signum).name)


@contextmanager
def _signals_unwind() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_demo(options: DemoOptions, stream: TextIO = sys.stdout) -> int:
    out = Output(stream, time.monotonic())
    night = night_of(options.night_of, options.timezone)
    with _signals_unwind(), ExitStack() as cleanup:
        root = Path(tempfile.mkdtemp(prefix="nachtwacht-demo-"))
        # The embedded PostgreSQL runs as its own system user when the demo runs as root.
        root.chmod(0o755)
        if not options.keep:
            cleanup.callback(shutil.rmtree, root, ignore_errors=True)
        try:
            return _Demo(options, night, root, out, cleanup).play()
        except (KeyboardInterrupt, _Stopped):
            out.line("nachtwacht demo: interrupted; stopping everything it started")
            return 130
    raise AssertionError("unreachable")  # pragma: no cover


class _Demo:
    def __init__(
        self, options: DemoOptions, night: Night, root: Path, out: Output, cleanup: ExitStack
    ) -> None:
        self.options = options
        self.night = night
        self.root = root
        self.out = out
        self.cleanup = cleanup
        self.platform = ControlPlane(
            data_dir=root / "control-plane", log_path=root / "control-plane.log"
        )
        self.hosts: list[RealHost] = []
        self.simulated: list[SimulatedAgent] = []
        self.orgs: list[OrgAccount] = []
        self.supervisor: ServiceSupervisor | None = None
        # The supervisor's starts by reason once 1.0.0 was installed everywhere, before the night.
        self.setup_starts: Counter[str] = Counter()

    # -- set-up ---------------------------------------------------------------------------------

    def play(self) -> int:
        options, night, out = self.options, self.night, self.out
        kind = "real agent processes" if options.real_processes else "simulated agents"
        out.line(
            f"nachtwacht demo: the night of {night.day.isoformat()} ({night.timezone}), "
            f"{options.agent_count} {kind} in {len(options.org_sizes)} organisation(s) "
            f"({', '.join(map(str, options.org_sizes))}), clock {options.speed:g}x"
        )
        note = night.daylight_saving_note()
        if note:
            out.line(f"  {note}")
        out.line(f"  everything lives in {self.root}")
        self.cleanup.callback(self.platform.close, keep_serving=options.keep)
        self.platform.start_database()
        out.step(f"embedded PostgreSQL ready, migrated ({self.platform.data_dir})")

        keys_dir = self.root / "release-keys"
        public_key = make_release_key(keys_dir)
        signed_at = night.start - SIGNED_BEFORE_NIGHT
        builds = self.root / "builds"
        old = sign_build(
            version=OLD_VERSION,
            manifest_version=1,
            keys_dir=keys_dir,
            workdir=builds,
            clock_setting=showing_now(signed_at).setting(),
        )
        new = sign_build(
            version=NEW_VERSION,
            manifest_version=2,
            keys_dir=keys_dir,
            workdir=builds,
            clock_setting=showing_now(signed_at + timedelta(hours=1)).setting(),
        )
        out.step(f"release key made; provibr-agent {OLD_VERSION} and {NEW_VERSION} built, signed")

        before_night = night.start - timedelta(hours=1)
        setup_clock = showing_now(before_night)
        self.orgs = self.platform.enroll_fleet(
            options.org_sizes, _org_names(len(options.org_sizes)), setup_clock
        )
        operator_key = self.platform.create_operator_key(setup_clock)
        self._write_credentials(operator_key)
        out.step(f"{len(self.orgs)} organisation(s) and {options.agent_count} agents enrolled")

        self._publish(old, public_key, before_night)
        if options.real_processes:
            self._install_first_version(old, public_key, before_night)
        else:
            out.step(f"{options.agent_count} simulated agents start on {OLD_VERSION}")
        # Straight to everyone: the demo shows one night of the whole fleet updating; the canary
        # stage has tests of its own (tests/control_plane/api/test_rollout.py).
        self._publish(new, public_key, before_night, stage="everyone")
        out.step(f"published {NEW_VERSION} (signature checked by the control plane)")
        return self._night(public_key, new)

    def _publish(
        self, build: SignedBuild, public_key: Path, at: datetime, stage: str | None = None
    ) -> None:
        """`nachtwacht control publish-release`: the control plane checks the signature first."""
        publish(
            build,
            stage=stage,
            location=[
                "--data-dir", str(self.platform.data_dir), "--release-public-key", str(public_key)
            ],
            env={FAKE_CLOCK_ENV: showing_now(at).setting()},
        )  # fmt: skip

    def _write_credentials(self, operator_key: str) -> None:
        path = self.root / "credentials.json"
        document = {
            "operator_key": operator_key,
            "organisations": [
                {"name": org.name, "org_id": org.org_id, "panel_key": org.panel_key}
                for org in self.orgs
            ],
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as stream:
            json.dump(document, stream, indent=2)

    def _install_first_version(self, old: SignedBuild, public_key: Path, before: datetime) -> None:
        health_script = write_health_script(self.root / "bin" / "agent-health")
        supervisor = self.supervisor = ServiceSupervisor()
        for org in self.orgs:
            for account in org.agents:
                host = AgentHost(
                    self.root / "hosts" / account.name,
                    keys_dir=public_key.parent,
                    health_script=health_script,
                )
                host.prepare()
                supervisor.add(host)
                self.hosts.append(RealHost(account=account, org_name=org.name, host=host))
        supervisor.start()
        self.cleanup.callback(supervisor.close)
        trusted = load_public_keys([public_key])
        with artifact_server() as server, ThreadPoolExecutor(INSTALL_WORKERS) as pool:
            url = server.serve("/old.tar.gz", old.artifact.read_bytes())
            jobs = [
                pool.submit(
                    preinstall,
                    host.host,
                    manifest=old.manifest.read_bytes(),
                    signature=old.signature.read_bytes(),
                    artifact_url=url,
                    trusted_keys=trusted,
                    before_night=before,
                    health_poll_seconds=0.1,
                )
                for host in self.hosts
            ]
            for job in jobs:
                job.result()
        self.setup_starts = Counter(supervisor.starts)
        self.out.step(
            f"{OLD_VERSION} installed on {len(self.hosts)} hosts by the updater, "
            "each agent service running under the demo's supervisor"
        )

    # -- the night ------------------------------------------------------------------------------

    def _night(self, public_key: Path, new: SignedBuild) -> int:
        options, night, out = self.options, self.night, self.out
        settings = SettingsService(self.platform.pool).get()
        caps = (settings.org_cap, settings.global_cap)
        catch_up = timedelta(minutes=settings.catch_up_minutes)
        # The night's clock stands at its start while the control plane and the agents start
        # (however long a busy machine takes), and runs from the moment all of them are ready.
        night_clock = NightClock.held(
            night.start, begins=self.root / "night-begins", speed=options.speed
        )
        clock = night_clock.fake()
        url = self.platform.serve(clock_setting=clock.setting(), public_key=public_key)
        out.step(f"control plane serving at {url} (pid {self.platform.pid}) on the fast clock")
        fleet_done = self._start_agents(url, clock, public_key)
        self._wait_until_ready()
        night_clock.begin()
        out.line(
            f"the night runs from {night.label(night.start)} to {night.label(night.end)}: "
            f"{night.minutes:g} platform minutes, about {night.minutes * 60 / options.speed:.0f} s"
        )
        table = LiveTable(out, night, caps)
        table.legend()
        shown_until = night.start
        window_closes = night.slot_at + catch_up
        while True:
            now = min(clock.now(), night.end)
            table.show(take_snapshot(self.platform.pool, night, now, catch_up))
            # Every minute that has ended since the last line gets its own, as of its end.
            while shown_until + timedelta(minutes=1) <= now:
                shown_until += timedelta(minutes=1)
                # Its last instant: at 03:00:00 the 02:59 minute's agents were not due yet.
                last_instant = shown_until - timedelta(microseconds=1)
                ended = take_snapshot(self.platform.pool, night, now, catch_up, as_of=last_instant)
                table.minute_ended(ended, window_closes=window_closes)
            if now >= night.end:
                break
            time.sleep(REFRESH_SECONDS)
        final = take_snapshot(self.platform.pool, night, night.end, catch_up)
        self._stop_agents()
        fleet_done.wait()
        return self._report(final, caps, url, new)

    def _start_agents(self, url: str, clock: FakeClock, public_key: Path) -> threading.Event:
        """Start the fleet; the event is set when simulated agents have finished the night."""
        done = threading.Event()
        if self.options.real_processes:
            for host in self.hosts:
                host.write_agent_config(control_url=url, speed=self.options.speed)
            self.cleanup.callback(self._stop_agents)
            for host in self.hosts:
                host.start_daemon(clock.setting())
            done.set()
            self.out.step(f"{len(self.hosts)} `nachtwacht agent run` daemons started")
            return done
        for org in self.orgs:
            for account in org.agents:
                self.simulated.append(
                    SimulatedAgent(
                        agent_id=account.agent_id,
                        name=account.name,
                        org_name=org.name,
                        agent_key=account.agent_key,
                        installed=OLD_VERSION,
                        base_url=url,
                    )
                )
        fleet = SimulatedFleet(
            self.simulated, clock=clock, trusted_keys=load_public_keys([public_key])
        )
        stop = threading.Event()

        def live() -> None:
            try:
                asyncio.run(fleet.run(until=self.night.end, stop=stop))
            finally:
                done.set()

        thread = threading.Thread(target=live, name="simulated-fleet", daemon=True)
        thread.start()
        self.cleanup.callback(thread.join)
        self.cleanup.callback(stop.set)
        self.out.step(f"{len(self.simulated)} simulated agents live in this process")
        return done

    def _wait_until_ready(self) -> None:
        """Until every daemon has said `daemon.ready`, while the night's clock stands still;
        a daemon that is not ready within the demo's time budget ends the demo."""
        deadline = time.monotonic() + BUDGET_SECONDS
        waiting = list(self.hosts)
        while waiting := [host for host in waiting if not host.host.is_ready()]:
            if time.monotonic() > deadline:
                raise DemoFailed(
                    f"{len(waiting)} daemon(s) not ready after {BUDGET_SECONDS:.0f} s; "
                    f"see hosts/<name>/daemon.log under {self.root}"
                )
            time.sleep(REFRESH_SECONDS)
        if self.hosts:
            self.out.step("all daemons ready; the night begins")

    def _stop_agents(self) -> None:
        for host in self.hosts:
            if host.daemon is not None and host.daemon.poll() is None:
                host.daemon.send_signal(signal.SIGTERM)
        for host in self.hosts:
            host.stop_daemon()

    # -- the report -----------------------------------------------------------------------------

    def _report(self, final: Snapshot, caps: tuple[int, int], url: str, new: SignedBuild) -> int:
        out, night = self.out, self.night
        out.line("")
        out.line(f"the night of {night.day.isoformat()}, as the control plane recorded it:")
        for line in render_table(final, night, caps)[1:]:
            out.line(f"  {line}")
        out.line("caps:")
        for line in caps_lines(final, caps):
            out.line(line)
        if self.supervisor is not None:
            for line in service_start_lines(
                self.setup_starts, Counter(self.supervisor.starts), hosts=len(self.hosts)
            ):
                out.line(line)
        self._timeline(url)
        out.line("notifications:")
        for line in notification_lines(url, self.orgs, night):
            out.line(line)
        self._where_next(url)
        settled = final.total("updated") + final.total("up_to_date")
        elapsed = time.monotonic() - out.started
        if elapsed > BUDGET_SECONDS:
            out.line(
                f"this machine took {elapsed:.0f} s, more than the {BUDGET_SECONDS:.0f} s the demo "
                "aims for (it is slow or busy): try a higher --speed or fewer agents"
            )
        else:
            out.line(f"done in {elapsed:.0f} s")
        if settled < final.agents:
            out.line(
                f"{final.agents - settled} of {final.agents} agents did not reach {new.version} "
                "or up to date tonight:"
            )
            unfinished = unfinished_runs(self.platform.pool, night)
            for name, status, error in unfinished:
                out.line(f"  {name}: {status}" + (f" — {error}" if error else ""))
            if any("stalled" in (error or "") for _, _, error in unfinished):
                out.line(
                    f"this machine was too slow for {self.options.speed:g}x: the control plane "
                    "did not answer a download within the daemon's read timeout (30 platform "
                    f"seconds, {30 / self.options.speed:.2g} real seconds at this speed); try "
                    f"--speed {max(1, self.options.speed // 2):g}"
                )
        self._panel_door(url)
        return 1 if settled < final.agents else 0

    def _panel_door(self, url: str) -> None:
        """With --keep, the last lines: where to look at this night in the panel, and a key to
        sign in with, so a newcomer need not open credentials.json first."""
        if not self.options.keep or not self.orgs:
            return
        org = self.orgs[0]
        self.out.line(f"the panel: {url}/panel/")
        self.out.line(f"  sign in with {org.name}'s panel key: {org.panel_key}")

    def _timeline(self, url: str) -> None:
        out, night = self.out, self.night
        agent_id = latest_served_agent(self.platform.pool, night)
        if agent_id is None:
            out.line("one agent's night: no agent was updated")
            return
        org = next(o for o in self.orgs if any(a.agent_id == agent_id for a in o.agents))
        name = next(a.name for a in org.agents if a.agent_id == agent_id)
        out.line(f"one agent's night — {name} ({org.name}), the last one its caps let through:")
        host = next((h for h in self.hosts if h.account.agent_id == agent_id), None)
        if host is not None:
            out.line("  as its daemon logged it:")
            entries = daemon_timeline(host.host.daemon_log, night)
        else:
            out.line("  as the simulated agent saw it:")
            agent = next(a for a in self.simulated if a.agent_id == agent_id)
            entries = journal_timeline(agent.journal)
        for line in timeline_lines(entries, night):
            out.line(f"  {line}")
        out.line(f"  as the control plane recorded it (GET /v1/agents/{agent_id}/events):")
        for line in control_plane_timeline(url, org, agent_id, night):
            out.line(f"  {line}")

    def _where_next(self, url: str) -> None:
        out = self.out
        credentials = self.root / "credentials.json"
        if self.options.keep:
            out.line(
                f"kept: the control plane runs at {url} (pid {self.platform.pid}), API at "
                f"{url}/docs, still on the fast clock"
            )
            out.line(f"  panel and operator keys: {credentials}")
            out.line(f"  stop it with: kill {self.platform.pid}   then remove {self.root}")
        else:
            out.line(
                f"the control plane was at {url} (API at {url}/docs); run with --keep to leave "
                "it running with its keys, and explore"
            )
