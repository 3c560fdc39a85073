"""A Python that sees only what a customer host installs: the project's `agent` extra and the
packages it needs, nothing of the developer's environment (a test tool such as `rich` or `click`
beside httpx makes httpx import its command-line tool, which no customer host has).

A venv without pip whose site-packages links the installed distributions of that closure, read
from pyproject.toml and each distribution's own metadata; the project itself comes from the
checkout (`PYTHONPATH`, as every child process of the tests gets it).
"""

from __future__ import annotations

import importlib.metadata
import tomllib
import venv
from pathlib import Path

from packaging.requirements import Requirement

from tests.worlds.processes import REPO_ROOT

__all__ = ["agent_closure", "customer_python"]


def _needed(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in extras or {""})


def agent_closure() -> set[str]:
    """The distributions the `agent` extra needs, with what they need in turn (normalized
    names)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(text) for text in project["dependencies"]]
    wanted += [Requirement(text) for text in project["optional-dependencies"]["agent"]]
    found: set[str] = set()
    while wanted:
        requirement = wanted.pop()
        name = requirement.name.lower().replace("_", "-")
        if name in found:
            continue
        found.add(name)
        distribution = importlib.metadata.distribution(name)
        for text in distribution.requires or []:
            inner = Requirement(text)
            if _needed(inner, set(requirement.extras)):
                wanted.append(inner)
    return found


def customer_python(folder: Path) -> Path:
    """Make the venv in `folder` (once) and return its interpreter."""
    python = folder / "bin" / "python"
    if python.exists():
        return python
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    (site_packages,) = folder.glob("lib/python*/site-packages")
    for name in sorted(agent_closure()):
        distribution = importlib.metadata.distribution(name)
        tops = {
            Path(str(file)).parts[0]
            for file in distribution.files or []
            if not str(file).startswith("..") and "/" in str(file)
        }
        tops |= {str(file) for file in distribution.files or [] if "/" not in str(file)}
        for top in sorted(tops):
            source = Path(str(distribution.locate_file(top)))
            target = site_packages / top
            if source.exists() and not target.exists() and top != "__pycache__":
                target.symlink_to(source)
    return python
