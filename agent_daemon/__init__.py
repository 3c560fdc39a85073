"""The agent daemon: the updater on a customer host (`nachtwacht agent …`, docs/agent_daemon.md).

Read `minute.decision` first: the five steps of a slot and which of them consumes it, as one pure
function. Everything else is I/O around it. One package per responsibility, each with its own map:

    minute/       the daemon's minute: the pure decision, the executor, the sync, the dispatch of
                  a claim, and the service that runs one minute after the other
    connection/   the control plane, outbound only: the wire's meaning, the calls, the one HTTP
                  client with its proxies and TLS trust, the server's clock, the config cache
    disk/         the daemon's files: state, outbox, reports, the held trust root; atomic writes;
                  one process per lock
    host/         what the host sees: systemd notify, journald lines, the activity, `status`
    commands/     `nachtwacht agent enroll | run | status | hold | release-hold | update-now |
                  self-update`
    updater/      applies one update: verify, download, install, switch, restart, health-check,
                  roll back
    self_update/  the updater's own builds side by side (/opt/nachtwacht/versions): install one
                  from wheels, switch to it uncommitted, commit once it has polled; the guard
                  script (packaging/self-update/guard.sh) takes a switch back without it
    settings      the one `AgentSettings` (updater section nested): flags, agent.toml, env
    path_fields   the settings' absolute-path field (network and updater sections alike)
    errors        the agent's exception tree

Layers: this package imports `ground`, `shared_planner` and `signed_release`, never `nachtwacht`
or `control_plane`. `updater/` uses only `errors`, `path_fields`, `disk.atomic_file`,
`disk.held_trust_root` and `disk.pid_lock` from here; the daemon's modules import the updater,
never the other way round. `self_update/` uses `errors`, `disk.atomic_file` and `updater.layout`
(the same link swapping for both kinds of builds).
Importing a package has no side effects: each `__init__` is its map alone.
"""
