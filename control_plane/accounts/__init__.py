"""Organisations, agent enrolment and the bearer credentials of the three audiences; the named
people who sign in as themselves.

services     create organisations and agents, issue keys, authenticate a caller; the panel's
             sign-in sessions (`SessionService`: opened with a key, ended with it)
credentials  the audiences, secret generation and hashing (no routes: the CLI issues keys)
people       named people (an organisation's viewers and editors, and operators): invitations
             (a link shown once, single use, seven days), password then TOTP sign-in, the lock
             after repeated failures, their sessions; a role changed (never the last editor's),
             a new invitation link, a password reset, removal
passwords    scrypt password hashes and RFC 6238 TOTP codes (standard library only)
oidc         an organisation's own OpenID Connect provider: its settings (saved, removed) and
             the code flow with PKCE (Authlib), the ID token verified against the provider's keys
             (joserfc); every request to the provider under the outbound address policy
             (`notifications.addresses`)
"""
