"""The full wheel's `[control-plane]` extra installs everything the control plane imports.

An operator installs `nachtwacht-<v>-py3-none-any.whl[control-plane]` into a fresh environment
(README, "Running each part for real"); the development environment holds every extra at once, so
a module the control plane imports that only the agent's extra brings would pass every other test
and fail on the operator's first `nachtwacht control` command. This test reads every module under
`control_plane/`, follows its imports of the project's own packages, and requires each other
distribution it reaches to be among what the extra installs (its requirements and theirs).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.worlds.processes import REPO_ROOT

OWN_PACKAGES = {"control_plane", "signed_release", "shared_planner", "ground", "nachtwacht"}


def _module_file(name: str) -> Path | None:
    base = REPO_ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_names(path: Path) -> set[str]:
    """Every module name an import in the file may load, at any depth of the file, except the
    imports only a type checker reads (`if TYPE_CHECKING:`)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{node.module}" if node.module else anchor
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return names


def _third_party_imports() -> dict[str, str]:
    """Each top-level module outside the project and the standard library that the control
    plane's modules load, directly or through the project's other packages, with one module that
    imports it."""
    to_read = sorted((REPO_ROOT / "control_plane").rglob("*.py"))
    read: set[Path] = set()
    found: dict[str, str] = {}
    while to_read:
        path = to_read.pop()
        if path in read:
            continue
        read.add(path)
        for name in _imported_names(path):
            top = name.partition(".")[0]
            if top in OWN_PACKAGES:
                # The module and every package above it run when it is imported.
                parts = name.split(".")
                for depth in range(1, len(parts) + 1):
                    file = _module_file(".".join(parts[:depth]))
                    if file is not None and file not in read:
                        to_read.append(file)
            elif top and top not in sys.stdlib_module_names:
                found.setdefault(top, _module_name(path))
    return found


def _installed_by(requirements: list[str]) -> set[str]:
    """The distributions these requirements install, with what they require in turn."""
    installed: set[str] = set()
    pending = [(Requirement(text), "") for text in requirements]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        # An extra brings requirements of its own: follow each extra asked for once.
        key = f"{name}[{','.join(sorted(requirement.extras))}]"
        if key in installed:
            continue
        installed.update({name, key})
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue  # not installed here, so nothing imports it here either
        for text in requires:
            nested = Requirement(text)
            for asked in ("", *requirement.extras):
                if nested.marker is None or nested.marker.evaluate({"extra": asked}):
                    pending.append((nested, asked))
                    break
    return {name for name in installed if "[" not in name}


def test_the_control_plane_extra_installs_every_module_the_control_plane_imports() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    installed = _installed_by(
        [*project["dependencies"], *project["optional-dependencies"]["control-plane"]]
    )
    providers = metadata.packages_distributions()
    missing = {
        module: (importer, sorted(providers.get(module, ["(not installed here)"])))
        for module, importer in _third_party_imports().items()
        if not {canonicalize_name(d) for d in providers.get(module, [])} & installed
    }
    assert missing == {}, (
        "imported by the control plane, not installed by nachtwacht[control-plane] "
        "(module: importer, distribution): " + repr(missing)
    )
