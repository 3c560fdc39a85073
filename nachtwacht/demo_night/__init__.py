"""`nachtwacht demo`: one night for a small fleet on a fast clock, and the simulated agents that
the fleet benchmark (`bench/fleet.py`) shares with it.

    options.py    the command line, validated into `DemoOptions`
    night.py      which instants the night spans on a given date (pure)
    platform.py   the control plane: embedded PostgreSQL, accounts, releases, `control serve`
    hosts.py      real hosts: `nachtwacht agent run` processes and their managed agent service
    simulated.py  agents in one process speaking the same HTTP API (asyncio + httpx)
    progress.py   what the database says about the night, and the live table
    report.py     the end: one agent's timeline, notifications, where to look next
"""
