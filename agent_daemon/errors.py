"""The agent's failures, one base class per kind.

    AgentError
     +-- ConfigError             the agent's own config file is missing, unsafe or invalid
     +-- DaemonStateError        a state file cannot be read (corrupt, or written by newer code)
     +-- ControlPlaneError       talking to the control plane
          +-- ControlPlaneUnreachable   no answer, a timeout or a 5xx: the agent is offline
          +-- CredentialRefused         401/403: the agent's credential is not accepted
          +-- BadServerAnswer           an answer the agent cannot understand

Foreign exceptions (httpx, OSError, pydantic) are converted where they happen, with `raise ... from`.
Messages say what was expected, what was found, and which field or file.
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "BadServerAnswer",
    "ConfigError",
    "ControlPlaneError",
    "ControlPlaneUnreachable",
    "CredentialRefused",
    "DaemonStateError",
]


class AgentError(Exception):
    """Base of every failure the agent reports in its own words."""


class ConfigError(AgentError, ValueError):
    """The agent's config file is missing, unsafe (readable by others) or has a bad field."""


class DaemonStateError(AgentError):
    """A state file cannot be used: corrupt, or written by a newer version of the agent."""


class ControlPlaneError(AgentError):
    """Talking to the control plane failed."""


class ControlPlaneUnreachable(ControlPlaneError):
    """No usable answer (connection refused, timeout, 5xx): the agent is offline this minute."""


class CredentialRefused(ControlPlaneError):
    """The control plane refused the agent's credential (401 or 403)."""


class BadServerAnswer(ControlPlaneError):
    """The control plane answered something the agent cannot understand."""
