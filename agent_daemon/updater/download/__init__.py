"""The artifact's download: streamed to `staging/<sha256>.part`, hashed as it is written, cut off
at the signed `length`, bounded by a read timeout and one deadline, resumed with `Range` +
`If-Range`.

    fetch             `download_artifact`: the exchange, where the body continues, the copy,
                      the final check
    artifact_source   where the artifact may come from and whether the credential goes along
    staging           staging/: the `.part`, its ETag, the finished artifact; free space
    answer            the server's headers read with strict, bounded grammars; an error's code

The deadline over the whole exchange is `agent_daemon.connection.deadline`'s watchdog, the same
that bounds every answer of the control plane.
"""
