"""The parts of the demo's world: what `nachtwacht demo` starts and builds, each the way a user
would (the `nachtwacht` command as a child process, real loopback servers, real signed builds).
Everything here works from an installed package; an end-to-end test or a benchmark builds its
worlds from these same parts, so each of them exercises the product the same way.

This is the roof: it may import `ground`, `shared_planner`, `signed_release`, `agent_daemon` and
`control_plane`; nothing below the roof imports it. This module imports nothing, so an agent host
running `nachtwacht release build-demo-agent` never pulls in the control plane.

    errors.py           WorldError: a world could not be built (a child failed, a start timed out)
    children.py         the `nachtwacht` command as a child of this interpreter, its environment
                        (no inherited nachtwacht setting), a `Launcher` that starts it (by default
                        an interpreter of its own), one way to run it to completion and one way
                        to stop it
    clocks.py           NightClock (one fast fake clock shared by many processes), `showing_now`
                        (real speed, showing a given instant)
    databases.py        an embedded PostgreSQL in a folder, started and migrated
    control_planes.py   `nachtwacht control serve` as a real process on loopback, its admin
                        commands (`--json`), a clean stop
    demo_agent.py       the tiny real agent build (`provibr-agent`), faults included
    release_tooling.py  signed releases made with the real CLIs, as a release engineer runs them
                        (`nachtwacht release keygen | build-demo-agent | sign`, `publish-release`)
    artifact_server.py  a loopback HTTP server for builds (Range, If-Range, ETag)
    supervisor.py       systemd's `Restart=always` stand-in for the managed agent services
    hosts.py            one customer host's folders and managed agent, the health probe script,
                        the first install by the real updater
    daemons.py          `nachtwacht agent …` as real processes: enroll, status, `run` with its
                        JSON event lines
"""
