"""The ground floor: what every part of nachtwacht shares and nothing else builds on.

    clock       the one clock object per program, real or fast fake
    limits      numbers more than one program enforces (stdlib only: the planner imports them)
    instants    the one way an instant is written and read between programs (stdlib only)
    contract    the agent <-> control-plane messages, codes, paths and headers (pydantic)
    start_up    the collector paused while a command imports its part
    planted_files  a file another party may have put in place, read without following a
                link where not allowed, never waiting on a pipe, regular files only
    whole_numbers  a number written in text: ASCII digits and nothing else
    control_url    the address an agent reaches its control plane at

The layers, each importing only those below it (docs/architecture.md):

    roof        nachtwacht: the command, `plan`, `demo`, and `nachtwacht.demo_world` (the parts
                of the demo's world, which the tests' world kit builds on)
    programs    agent_daemon, control_plane
    core        shared_planner (pure), signed_release (the release format)
    ground      ground.clock, ground.limits, ground.instants, ground.contract
"""
