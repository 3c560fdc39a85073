"""The tests' world kit: what the end-to-end tests and the benchmarks add to the demo's world
(`nachtwacht.demo_world`, which they build on and never re-implement).

    processes.py        this checkout's `nachtwacht` children, forked from a fork server that
                        has imported the command line once (`FORKED`, a `Launcher`; `run_child`),
                        `REPO_ROOT` and `child_environment`
    clocks.py           ManualClock and SkewedClock, set by hand in tests
    releases.py         ReleaseFactory: keys, builds and signed releases in memory and on disk
    artifact_server.py  the demo's artifact server, plus the behaviours of hostile or broken
                        servers (cut, stalled, overlong, wrong ranges, refusals)
    daemons.py          `nachtwacht agent …` forked, and `DaemonProcess`: `agent run` whose JSON
                        event lines a test waits for
    hosts.py            the demo's `AgentHost`, its commands forked, with `start()` for a daemon
                        a test watches
    balancer.py         Debian's nginx with the shipped site (`packaging/nginx/`) in front of
                        replicas, TLS from a test CA, its access log naming the replicas tried
"""
