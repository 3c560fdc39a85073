"""One kit that builds worlds: what the demo, the end-to-end tests and the benchmarks start, so
each of them exercises the product the same way instead of re-implementing parts of it.

This is the roof: it may import `ground`, `shared_planner`, `signed_release`, `agent_daemon` and
`control_plane`; nothing below the roof imports it. This module imports nothing, so an agent host
running `nachtwacht release build-demo-agent` never pulls in the control plane.

    errors.py           WorldError: a world could not be built (a child failed, a start timed out)
    processes.py        the `nachtwacht` command as a child of this checkout, its environment,
                        one way to run it to completion and one way to stop it; both forked
                        from a fork server that has imported the command line once (a part
                        that is not installed, as the control plane on an agent host, is
                        left out of it), and `serve` forked from it for the tests
    clocks.py           ManualClock and SkewedClock (set by hand in tests), NightClock (one fast
                        fake clock shared by many processes), `showing_now` (real speed)
    databases.py        an embedded PostgreSQL in a folder, started and migrated
    control_planes.py   `nachtwacht control serve` as a real process on loopback, its admin
                        commands (`--json`), a clean stop
    demo_agent.py       the tiny real agent build (`provibr-agent`), faults included
    releases.py         ReleaseFactory: keys, builds and signed releases in memory and on disk
    release_tooling.py  the same with the real CLIs, as a release engineer runs them
                        (`nachtwacht release keygen | build-demo-agent | sign`, `publish-release`)
    artifact_server.py  a loopback HTTP server for builds (Range, If-Range, hostile behaviours)
    supervisor.py       systemd's `Restart=always` stand-in for the managed agent services
    hosts.py            one customer host's folders and managed agent, the health probe script,
                        the first install by the real updater
    daemons.py          `nachtwacht agent …` as real processes: enroll, status, `run` with its
                        JSON event lines
"""
