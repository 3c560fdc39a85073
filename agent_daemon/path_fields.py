"""The settings' path field, shared by the network section and the updater's: a path in the
agent's settings is absolute, because a relative one would mean something else under every
working directory systemd picks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

__all__ = ["AbsolutePath", "absolute_path"]


def absolute_path(path: Path) -> Path:
    if not path.is_absolute():
        raise ValueError("expected an absolute path")
    return path


AbsolutePath = Annotated[Path, AfterValidator(absolute_path)]
