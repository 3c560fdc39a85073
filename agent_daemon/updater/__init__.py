"""The updater of the managed agent: one update on a customer host, from a claimed release to the
agent running the new build — or the old one again (docs/agent_updater.md).

It knows nothing of schedules, slots or the control plane's API: the daemon hands it an
`UpdateRequest` and reports the `UpdateOutcome`. From its parent package it uses only `errors`,
`disk.atomic_file`, `disk.held_trust_root` and `disk.pid_lock`; nothing here imports the daemon.

    update_records      `UpdateRequest`, `UpdateOutcome`: what the daemon hands over and gets back
    updater             `Updater`: apply / resume / settle / installed_version — the lock, the
                        acceptance of a request, the entry points; it downloads, writes and runs
                        commands through the modules below, the one way into them
    step_machine        the steps of an accepted update, from the recorded one to an outcome;
                        the attempt bound (`MAX_RUN_ATTEMPTS`)
    switching           swap `current`/`previous`, restart and health-check, roll back; the end
                        of an update after an unexpected failure
    step_recorder       the state-file write at each step boundary; commit, fail, defer; tidying
    update_locking      one update at a time (`update.lock`), the updater's umask
    failure_reasons     pure: an exception's `OutcomeReason`, whether it may pass, its words
    on_demand           `UpdaterOnDemand`: the daemon's updater, built on the first update
    updater_settings    `UpdaterSettings`, the updater's section of the agent's settings
    trusted_keys        the trusted release-key files: read at start, key objects built on first use
    release_keys        the keys an update is verified with: the held trust root's, else the files'
    updater_state       the updater's crash-safe state file: floor, builds, the step in progress
    delivery_record     how the update's build came (patch or full, and why), in a file of its own
    swap_gate           the question asked right before the switch, and its three verdicts
    verify              pure: is this signed manifest acceptable here and now?
    download/           the artifact, resumable, bounded by the signed length and one deadline
                        (its own map in `download/__init__.py`)
    install             unpack into versions/<v>/ with `signed_release.build_archive`, self-test
    build_command       run the build's own code: bounded time and output, as the agent's user
    layout              versions/, current, previous: the install root on disk
    managed_service     restart the managed agent and health-check it within a deadline
"""
