"""The command line: `nachtwacht agent enroll | install | run | status | hold | release-hold |
update-now | uninstall | diagnose`.

cli               the arguments, each verb to its module, the error lines
agent_parts       what every verb makes from the settings: the state directory's file
                  names, the HTTP client, the track, the updater built on first use
enroll_cli        `enroll`: the config written once the control plane accepts it; the staged
                  path `install` shares (every flag checked first, named by its flag)
install_cli       `install`: an enrollment token exchanged, the config written, the units put in
                  place and the service started
enrollment_exchange   the token's exchange for the agent's own credential, its answers in words
unit_files        the systemd units: which a package installed, which `install` wrote; systemctl
uninstall_cli     `uninstall [--purge]`: the services stopped, `install`'s units removed
diagnose_cli      `diagnose`: one archive for support, every secret left out
run_cli           `run`: the daemon's start-up, every part of a running daemon built in one
                  place (`build_daemon`)
status_cli        `status`: the files gathered, printed as text or JSON
host_verbs_cli    `hold`, `release-hold`, `update-now`: one call each, in words
host_commands     `hold --until` as a person types it; `update-now` following its run
network_cli       enroll's proxy and trust flags, the proxy taken from the shell's environment,
                  the start-up network lines, status's lines
"""
