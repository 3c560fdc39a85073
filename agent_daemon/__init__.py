"""The agent daemon: the updater on a customer host (`nachtwacht agent …`, docs/agent_daemon.md).

Read `decision` first: it is the whole of DESIGN.md rule 8, pure. Everything else is I/O around it.

    the minute
      decision          pure `decide(state, config, answer, now) -> action`: the five steps and
                        which consumes the slot (asks `RefusalCode.consumes_slot`, nothing else)
      daemon            `Daemon`: the executor — reads the clock once per tick, does each action's
                        I/O through the modules below, feeds back
      config_sync       step 1, the reach: config with ETag/304, the cache, the clock's warning
      dispatch          step 5: a granted claim through the updater to its recorded, reported
                        outcome; retries inside the window; settles what no claim stands behind
      claim_keeper      the daemon's state saves when the disk may be full: claims and ended
                        runs kept in memory
      daemon_lines      the log lines that need words: a waiting minute, a slot gone
      daemon_loop       the service around it: APScheduler's one-minute job, signals, systemd
                        notify, one daemon per state directory
      claim_window      pure: until when a claimed run may still switch (its window, its token)
      swap_confirmation the updater's last question before a switch, asked of the control plane
    talking to the control plane (outbound only)
      wire              pure: what an answer means, read with `ground.contract`'s models (shared
                        with the demo's simulated fleet)
      control_plane_client  the calls: config (ETag/304), claims, reports; foreign errors mapped
      http_client       the one `httpx.Client` for every connection (a `transport=` seam for tests)
      network_settings  proxy, no_proxy, ca_file, pin, client certificate, insecure_http
      proxy_route       which proxy a request takes: agent.toml, then HTTPS_PROXY & co., no_proxy
      tls_trust         the OS trust store plus ca_file, the public-key pin, mTLS; failures in words
      server_clock      the control plane's clock as this host sees it (offset from every answer)
      config_cache      the last config on disk, for offline minutes and `status`
    on disk (atomic, versioned)
      daemon_state      last consumed slot, the claim in progress, recent runs
      outbox            reports not delivered yet, sent in order
      reporting         reports go through the outbox, one log line each
      atomic_file       temp file, fsync, rename, fsync the directory; format versions
      pid_lock          one process at a time on a file (daemon.lock, update.lock)
    the host
      settings          the one `AgentSettings` (updater section nested): flags, agent.toml, env
      cli               `nachtwacht agent enroll | run | status | hold | release-hold |
                        update-now`: the arguments, each verb to its module, the error lines
      agent_parts       what every verb makes from the settings: the state directory's file
                        names, the HTTP client, the track, the updater built on first use
      enroll_cli        `enroll`: the config written once the control plane accepts it
      run_cli           `run`: the daemon's start-up, every part of a running daemon built in
                        one place (`build_daemon`)
      status_cli        `status`: the files gathered, printed as text or JSON
      host_verbs_cli    `hold`, `release-hold`, `update-now`: one call each, in words
      network_cli       enroll's proxy and trust flags, the start-up network lines, status's lines
      status            what `status` says, from the files alone; what is wrong first
      host_commands     `hold --until` as a person types it; `update-now` following its run
      event_log         one `<N>`-prefixed JSON line per event on stdout (journald priorities)
      activity          what the daemon is doing: STATUS=, the watchdog's verdict, progress
                        lines, and the activity file `status` reads
      systemd_notify    READY / STATUS / WATCHDOG / STOPPING datagrams
      errors            the agent's exception tree
    updater/            applies one update: verify, download, install, switch, restart,
                        health-check, roll back (its own map in `updater/__init__.py`)

Layers: this package imports `ground`, `shared_planner` and `signed_release`, never `nachtwacht`
or `control_plane`. `updater/` uses only `errors`, `atomic_file` and `pid_lock` from here; the
daemon's modules import the updater, never the other way round.
"""
