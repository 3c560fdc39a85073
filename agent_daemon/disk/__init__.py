"""The daemon's files: written atomically, versioned, one writer at a time.

daemon_state      last consumed slot, the claim in progress, recent runs
held_trust_root   the trust root this host holds (read with plain json: version, expiry, keys)
atomic_file       temp file, fsync, rename, fsync the directory; format versions
pid_lock          one process at a time on a file (daemon.lock, update.lock)
"""
