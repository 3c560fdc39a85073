"""What the host sees of the daemon: systemd, the journal, `status`.

systemd_notify    READY / STATUS / WATCHDOG / STOPPING datagrams
stop_signals      SIGTERM / SIGINT set the stop event, with no lock taken in a signal handler
event_log         one `<N>`-prefixed JSON line per event on stdout (journald priorities)
activity          what the daemon is doing: STATUS=, the watchdog's verdict, progress lines,
                  and the activity file `status` reads
status            what `status` says, from the files alone; what is wrong first
status_times      its times, in the platform's zone and with it; how long ago, how long until
"""
