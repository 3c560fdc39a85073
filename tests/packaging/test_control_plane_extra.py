"""An operator installs the full wheel with its `[control-plane]` extra only, as the README says.

Every third-party module that the control plane, the release tool and the CLI import must then be
there: each must come from a distribution that the base dependencies or the `control-plane` extra
require, directly or through their own requirements. The agent's daemon (`agent_daemon`) and the
demo are left out: an operator's venv does not run them.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement

from tests.worlds.processes import REPO_ROOT

# What `nachtwacht control` and `nachtwacht release` run on (and `plan`, which needs nothing).
OPERATOR_PARTS = ("control_plane", "signed_release", "ground", "shared_planner")
OPERATOR_CLI = ("nachtwacht/cli.py", "nachtwacht/plan_cli.py", "nachtwacht/release_cli.py")
PROJECT_PACKAGES = {"control_plane", "signed_release", "ground", "shared_planner", "nachtwacht"}
PROJECT_PACKAGES |= {"agent_daemon", "tests", "bench"}


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_top_levels(files: Iterable[Path]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in PROJECT_PACKAGES:
                    continue
                found.setdefault(top, []).append(str(path.relative_to(REPO_ROOT)))
    return found


def _closure(requirements: Iterable[str]) -> set[str]:
    """Every distribution these requirements bring, by the installed distributions' metadata."""
    seen: set[str] = set()
    pending = [(Requirement(r), "") for r in requirements]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = _normalised(requirement.name)
        wanted = [(name, e) for e in ("", *sorted(requirement.extras))]
        for key in wanted:
            if "/".join(key) in seen:
                continue
            seen.add("/".join(key))
            requires = importlib.metadata.distribution(name).requires or []
            pending.extend((Requirement(r), key[1]) for r in requires)
    return {key.split("/")[0] for key in seen}


def test_the_control_plane_extra_brings_every_module_the_operators_commands_import() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    installed = _closure(
        [*project["dependencies"], *project["optional-dependencies"]["control-plane"]]
    )
    files = [p for part in OPERATOR_PARTS for p in sorted((REPO_ROOT / part).rglob("*.py"))]
    files += [REPO_ROOT / f for f in OPERATOR_CLI]
    distributions = importlib.metadata.packages_distributions()

    missing = {}
    for module, where in _imported_top_levels(files).items():
        providers = {_normalised(d) for d in distributions.get(module, [])}
        assert providers, f"{module} (imported by {where[0]}) is installed by no distribution"
        if not providers & installed:
            missing[module] = sorted(set(where))[:3]
    assert missing == {}
