"""The command line: `nachtwacht agent enroll | run | status | hold | release-hold | update-now`.

cli               the arguments, each verb to its module, the error lines
agent_parts       what every verb makes from the settings: the state directory's file
                  names, the HTTP client, the track, the updater built on first use
enroll_cli        `enroll`: the config written once the control plane accepts it
run_cli           `run`: the daemon's start-up, every part of a running daemon built in one
                  place (`build_daemon`)
status_cli        `status`: the files gathered, printed as text or JSON
host_verbs_cli    `hold`, `release-hold`, `update-now`: one call each, in words
host_commands     `hold --until` as a person types it; `update-now` following its run
network_cli       enroll's proxy and trust flags, the start-up network lines, status's lines
"""
