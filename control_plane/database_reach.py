"""Can a command reach its database at all? Said in words an operator can act on.

Every command (and `serve`) first connects once, plainly, to the database it was given
(`control_plane.startup.opened_database`), so a database that cannot be reached is said the same
way whatever the command goes on to do: "cannot connect to the database at HOST:PORT (NAME):
<reason> — <what to check>". The address is taken from the URL's host, port and database name
(libpq's defaults where it names none); the password is never said, and libpq's reason is kept
to its one line, with the password taken out should it ever hold it.
"""

from __future__ import annotations

import os
import re

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from control_plane.database_fence import CONNECTION_DEFAULTS
from control_plane.errors import DatabaseUnavailable

__all__ = ["database_address", "reach", "unreachable"]

# libpq's words around the reason: which server it tried, then "FATAL:" from the server itself.
_TRIED = re.compile(
    r'^(?:connection (?:failed|is bad): )?(?:connection to server (?:at "[^"]*"(?:, port \d+)?'
    r'|on socket "[^"]*") failed: )?(?:FATAL:\s+)?',
    re.ASCII,
)
# (a pattern searched in libpq's reason, lower case; what the operator checks), first match wins
_CHECKS = tuple(
    (re.compile(pattern), check)
    for pattern, check in (
        (r"refused", "check that PostgreSQL runs on that host and listens on that port"),
        (r"no such file or directory", "check that PostgreSQL runs there, and its socket"),
        (r"timeout|timed out", "no answer in time: check the host and port, and any firewall"),
        (r"resolve host|translate host name", "check the host's name (and this machine's DNS)"),
        (r"network is unreachable|no route to host", "check the network's route to that host"),
        (r"ssl|certificate", "check the server's certificate and the URL's sslmode, sslrootcert"),
        (
            r"pg_hba\.conf",
            "check that the server's pg_hba.conf lets this host, user and database in",
        ),
        (r"password|authentication", "check the URL's user and password"),
        (r'^role "', "check the URL's user"),
        (r'^database "', "check the URL's database name, or create the database"),
    )
)
_ELSE = "check the URL's host, port, database, user and password, and that PostgreSQL runs there"


def database_address(database_url: str) -> str:
    """`HOST:PORT (NAME)` of a connection string (each host of a list), never its password."""
    params = conninfo_to_dict(database_url)
    hosts = str(params.get("host") or os.environ.get("PGHOST") or "the local socket").split(",")
    ports = str(params.get("port") or os.environ.get("PGPORT") or "5432").split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)
    name = (
        params.get("dbname")
        or os.environ.get("PGDATABASE")
        or params.get("user")
        or os.environ.get("PGUSER")
        or "the user's own"
    )
    places = ",".join(f"{host}:{port}" for host, port in zip(hosts, ports, strict=False))
    return f"{places} ({name})"


def unreachable(database_url: str, exc: BaseException) -> DatabaseUnavailable:
    """The one line for a database that could not be connected to: where, why, what to check."""
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else type(exc).__name__
    reason = _TRIED.sub("", first).strip() or first
    if reason[1:2].islower():  # "Connection refused" reads on after a colon; "SSL error" stays
        reason = reason[:1].lower() + reason[1:]
    password = conninfo_to_dict(database_url).get("password")
    if password:
        reason = reason.replace(str(password), "***")
    lowered = reason.lower()
    check = next((check for pattern, check in _CHECKS if pattern.search(lowered)), _ELSE)
    return DatabaseUnavailable(
        f"cannot connect to the database at {database_address(database_url)}: {reason} — {check}"
    )


def reach(database_url: str) -> None:
    """Connect once and let go; `unreachable`'s DatabaseUnavailable when that fails. Waits at
    most the connect timeout the URL gives, else the control plane's own (`CONNECTION_DEFAULTS`)
    per host."""
    params = {
        "connect_timeout": CONNECTION_DEFAULTS["connect_timeout"],
        **conninfo_to_dict(database_url),
    }
    try:
        psycopg.connect(make_conninfo("", **params), autocommit=True).close()
    except psycopg.Error as exc:
        raise unreachable(database_url, exc) from exc
