"""Real loopback servers for the agent's networking tests: a private CA, a TLS control plane that
answers the config poll and serves an artifact, an HTTP CONNECT / forwarding proxy and a SOCKS5
proxy. Everything listens on 127.0.0.1 only; the proxies map made-up names to loopback ports, so
a test can name `control.example` without any traffic leaving the host."""
