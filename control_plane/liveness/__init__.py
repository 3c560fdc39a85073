"""The control plane's own liveness: when it was up, so our outage is never blamed on an agent.

marks       every serving process's marks (`mark_alive`) and their `Coverage`; read by the
            worker's missed pass and by a run's failure report (`platform_unavailable`)
"""
