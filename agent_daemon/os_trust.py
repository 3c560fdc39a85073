"""The operating system's trust store, read once per context (issue 16: footprint and CPU).

On macOS and Windows the OS verifies a server's chain itself (`truststore` hands each handshake to
Security.framework or CryptoAPI), and that is what the agent uses there. On Linux there is no such
service: the trust store *is* OpenSSL's CA bundle, and `truststore` re-reads the whole bundle
(~140 certificates) into its context at every connection — every minute for the config poll, as
keep-alive ends between minutes. The duplicates are dropped, but each reading costs CPU and
leaves its allocations behind: ~1 MiB more of the daemon's peak after the second poll, for the same
roots.

`OsTrustContext` reads the same roots, by the same rule, once: at the first handshake (so a
context that never connects — the update client of an idle daemon — holds none), then never again.
A CA added to the host's store later is trusted after the daemon restarts.

Which roots: OpenSSL's default locations (`SSL_CERT_FILE` / `SSL_CERT_DIR`, else the paths it was
built with) when they hold certificates; otherwise the first bundle found where Linux
distributions keep theirs (an OpenSSL built elsewhere, e.g. a Python from a foreign build).

How they are read: where OpenSSL's defaults name both a bundle and a hashed directory (Debian and
Ubuntu: `/etc/ssl/certs/ca-certificates.crt` and `/etc/ssl/certs`), the directory is consulted
first — OpenSSL reads a root from it only when a chain names that root, so a daemon that talks to
one control plane holds one root, not ~140. The bundle is read too, once, the first time a chain
does not verify with the directory (a host whose directory lacks a root its bundle has), and the
connection is made again (`RootsWidened`; no request has been sent when a handshake fails). So
what verifies is exactly what OpenSSL's own default — the bundle *and* the directory — verifies.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import sys
import threading
from collections.abc import Sequence
from typing import Any

__all__ = [
    "DISTRIBUTION_BUNDLES",
    "OsTrustContext",
    "RootsWidened",
    "load_os_directory_first",
    "os_trust_context",
]

# Where distributions keep their CA bundle, most common first.
DISTRIBUTION_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL, CentOS
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  # Fedora, RHEL (the extracted store)
    "/etc/ssl/ca-bundle.pem",  # openSUSE, SLES
    "/etc/ssl/cert.pem",  # Alpine, Arch
)
# How OpenSSL names the files of a hashed certificate directory (`c_rehash`): hash.N
_HASHED_NAME = re.compile(r"^[0-9a-f]{8}\.\d+$", re.IGNORECASE)


def _holds_hashed_certificates(directory: str) -> bool:
    try:
        return any(_HASHED_NAME.match(name) for name in os.listdir(directory))
    except OSError:
        return False


def load_os_directory_first(
    context: ssl.SSLContext,
    *,
    defaults: ssl.DefaultVerifyPaths | None = None,
    bundles: Sequence[str] = DISTRIBUTION_BUNDLES,
) -> str | None:
    """Add the OS's trusted roots to `context`, the hashed directory alone where OpenSSL's
    defaults name a bundle beside it: then return that bundle, for the caller to add when a
    chain does not verify without it; None when everything is added."""
    found = ssl.get_default_verify_paths() if defaults is None else defaults
    hashed = bool(found.capath) and _holds_hashed_certificates(found.capath)
    if found.cafile and hashed:
        context.load_verify_locations(capath=found.capath)
        return found.cafile
    if found.cafile or hashed:
        context.set_default_verify_paths()
        return None
    for bundle in bundles:
        if os.path.isfile(bundle):
            context.load_verify_locations(cafile=bundle)
            return None
    return None


class RootsWidened(ssl.SSLCertVerificationError):
    """A chain did not verify with the OS's hashed directory alone; the bundle beside it is now
    trusted too, so the same connection, made again, is judged as OpenSSL's default would."""


class OsTrustContext(ssl.SSLContext):
    """A client context that adds the OS's roots at its first handshake, once."""

    def __init__(self, protocol: int) -> None:
        # ssl.SSLContext.__new__ has already taken `protocol`.
        self._roots_lock = threading.Lock()
        self._roots_loaded = False
        self._bundle_deferred: str | None = None

    def _load_roots_once(self) -> None:
        with self._roots_lock:
            if not self._roots_loaded:
                self._bundle_deferred = load_os_directory_first(self)
                self._roots_loaded = True

    def _add_deferred_bundle(self) -> None:
        """Trust the bundle held back so far (once; later calls find nothing left to add)."""
        with self._roots_lock:
            bundle, self._bundle_deferred = self._bundle_deferred, None
            if bundle is not None:
                self.load_verify_locations(cafile=bundle)

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self._load_roots_once()
        handshake_now = args[1] if len(args) > 1 else kwargs.get("do_handshake_on_connect", True)
        if not handshake_now:
            # The handshake comes later, where its failure does not come back here.
            self._add_deferred_bundle()
        # Judged by what this handshake was made with: another one's failure may have added the
        # bundle meanwhile, and then this connection, made again, is judged with it too.
        without_bundle = self._bundle_deferred is not None
        try:
            return super().wrap_socket(sock, *args, **kwargs)
        except ssl.SSLCertVerificationError as failed:
            if not without_bundle:
                raise
            self._add_deferred_bundle()
            widened = RootsWidened(*failed.args)
            widened.verify_code = failed.verify_code
            widened.verify_message = failed.verify_message
            raise widened from failed

    def wrap_bio(
        self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, *args: Any, **kwargs: Any
    ) -> ssl.SSLObject:
        # The handshake of a memory BIO (TLS through an https:// proxy) happens after this
        # returns, where no failure comes back here: such a context trusts the bundle at once.
        self._load_roots_once()
        self._add_deferred_bundle()
        return super().wrap_bio(incoming, outgoing, *args, **kwargs)


def os_trust_context() -> ssl.SSLContext:
    """A TLS client context (hostname checked, certificate required) trusting the OS's store."""
    if sys.platform in {"darwin", "win32"}:
        import truststore

        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return OsTrustContext(ssl.PROTOCOL_TLS_CLIENT)
