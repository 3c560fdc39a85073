"""Type names shared by the data layer."""

from __future__ import annotations

from typing import TypeAlias

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

__all__ = ["Connection", "Pool"]

Connection: TypeAlias = psycopg.Connection[DictRow]
Pool: TypeAlias = ConnectionPool[Connection]
