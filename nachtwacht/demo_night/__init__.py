"""`nachtwacht demo`: one night for a small fleet on a fast clock, and the simulated agents that
the fleet benchmark (`bench/fleet.py`) shares with it.

    options.py    the command line, validated into `DemoOptions`
    night.py      which instants the night spans on a given date (pure)
    run.py        the demo from start to end, and its clean-up
    platform.py   the control plane: embedded PostgreSQL, accounts, `control serve`
    hosts.py      real hosts: an account, a world-kit host and its `nachtwacht agent run` daemon
    simulated.py  agents in one process speaking the same HTTP API (asyncio + httpx)
    progress.py   what the database says about the night
    terminal.py   timed steps and the live table
    report.py     the end: caps held, one agent's timeline, notifications

The parts every world shares — starting the control plane, making and publishing signed builds,
hosts with their managed agent and supervisor, the clocks — come from `nachtwacht.demo_world`.
"""
