"""An embedded PostgreSQL for a world: started in a folder and migrated to head.

The world's own process holds the server (to seed it through the control plane's services and to
read what happened); `nachtwacht control serve` attaches to the same one, and the embedded server
stops when the last of them lets go.
"""

from __future__ import annotations

from pathlib import Path

from control_plane import migrate
from control_plane.database import EmbeddedPostgres
from control_plane.errors import ControlPlaneError
from nachtwacht.demo_world.errors import WorldError

__all__ = ["EmbeddedDatabase"]


class EmbeddedDatabase:
    """`EmbeddedPostgres` in `data_dir`, migrated; `stop()` lets go of it."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._embedded = EmbeddedPostgres(data_dir)
        self.url = ""

    @property
    def pgdata(self) -> Path:
        return self._embedded.pgdata

    def start(self) -> str:
        """Start (or attach to) the server and migrate it; returns the database URL."""
        try:
            self.url = self._embedded.start()
            migrate.upgrade(self.url)
        except ControlPlaneError as exc:
            raise WorldError(f"the embedded PostgreSQL did not start: {exc}") from exc
        return self.url

    def stop(self) -> None:
        self._embedded.stop()
