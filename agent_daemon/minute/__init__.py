"""The minute: what the daemon does once a minute, and the service that runs it.

Read `decision` first: the five steps of a slot, and which of them consumes it, as one pure
function. Everything else here is the I/O around it.

    decision          pure `decide(state, config, answer, now) -> action`: the five steps and
                      which consumes the slot (asks `RefusalCode.consumes_slot`, nothing else)
    daemon            `Daemon`: the executor — reads the clock once per tick, does each action's
                      I/O, feeds back
    config_sync       step 1, the reach: config with ETag/304, the cache, the clock's warning
    trust_root_follow the trust root told with each poll, and walked to the newest announced
    dispatch          step 5: a granted claim through the updater to its recorded, reported
                      outcome; retries inside the window; settles what no claim stands behind
    claim_keeper      the daemon's way to its state file: a state the disk refused is kept in
                      memory and planned with; a claim is dispatched only once it is on disk
    claim_window      pure: until when a claimed run may still switch (its window, its token)
    swap_confirmation the updater's last question before a switch, asked of the control plane
    reporting         every report goes through the outbox, with one log line each
    daemon_lines      the log lines that need words: a waiting minute, a slot gone
    daemon_loop       the service around it: APScheduler's one-minute job, signals, systemd
                      notify, one daemon per state directory
"""
