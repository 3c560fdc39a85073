"""The daemon's files: written atomically, versioned, one writer at a time.

daemon_state      last consumed slot, the claim in progress, recent runs
atomic_file       temp file, fsync, rename, fsync the directory; format versions
pid_lock          one process at a time on a file (daemon.lock, update.lock)
"""
