"""The updater updates itself: its own builds side by side, a switch that counts only once the new
build has checked in, and a way back that needs none of the new code.

    <own root, /opt/nachtwacht>/
        versions/<version>/venv   one build of the updater: a venv made from the offline bundle's
                                  wheels (`pip install --no-index`), `.complete` written last
        current -> versions/<v>   what nachtwacht-agent.service and /usr/bin/nachtwacht run
        previous -> versions/<v>  what the guard goes back to
    <state dir>/self-update/      the switch's files, key=value lines a POSIX shell reads
        pending                   written before `current` moves: from, to, deadline, attempts
        pending.rolling           the guard has taken the switch back (finishing it is safe)
        pending.committing        the new build has taken it as checked in
        started                   the build that last started while a switch was pending
        rolled_back, committed    what happened, for the daemon's next report
        run                       the control plane's run of a switch the daemon made: the
                                  outcome is reported for it, by the new build or the old one

The links are changed by `updater.layout.InstallLayout`, the same code that swaps the managed
agent's builds. The way back is `packaging/self-update/guard.sh`, run before every start of the
unit and by a timer every minute: it reads `pending`, counts start attempts, and past the limit or
the deadline points `current` back at `from` and writes `rolled_back` with the reason.

    switch_files    the key=value files and their names (the format the guard reads too)
    own_builds      the own install root: install a build from wheels, the running build
    pending_switch  switch, commit_if_pending, the outcome records; the check-in of a daemon
    host_install    the daemon's way in: unpack a verified bundle, install its build, switch
    seam            a granted self-update verified and downloaded as a managed build is, then
                    handed to `host_install`

Rule for the files under the state directory (the daemon's state, the updater's, the outbox): a
build must read what the release before it and the release after it write. See
`disk.atomic_file`.
"""
