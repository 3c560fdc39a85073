"""The connection to the control plane: outbound only, every answer untrusted input.

wire                  pure: what an answer means, read with `ground.contract`'s models
                      (shared with the demo's simulated fleet)
control_plane_client  the calls: config (ETag/304), claims, reports; foreign errors mapped
http_client           the one `httpx.Client` for every connection (a `transport=` seam)
deadline              one bound over a request's whole exchange (connect, head, body): a
                      watchdog that shuts the request's own connection down
network_settings      proxy, no_proxy, ca_file, pin, client certificate, insecure_http
proxy_route           which proxy a request takes: agent.toml, then HTTPS_PROXY & co.,
                      no_proxy
tls_trust             the host's trust store plus ca_file, the public-key pin, mTLS;
                      failures in words
server_clock          the control plane's clock as this host sees it (offset from answers)
config_cache          the last config on disk, for offline minutes and `status`
outbox                reports not delivered yet, kept on disk and sent in order
"""
