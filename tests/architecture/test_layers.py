"""Layers without loops (docs/architecture.md): every import in the product's packages, read from
the source, points down or sideways within its layer, never up, and no set of modules imports
itself round in a circle — not even through an import placed inside a function or under
`TYPE_CHECKING`, the two places a loop hides."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Lowest first. A package may import its own layer's packages only where listed in SIDEWAYS.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("ground",),
    ("shared_planner", "signed_release"),
    ("agent_daemon", "control_plane"),
    ("nachtwacht",),
)
# Within a layer, allowed imports (importer -> imported). The two programs never import each other.
SIDEWAYS: frozenset[tuple[str, str]] = frozenset()

LAYER_OF = {package: level for level, packages in enumerate(LAYERS) for package in packages}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _product_modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in LAYER_OF
        for path in sorted((REPO / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def _imports(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import statement anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:
                yield f"{target}.{alias.name}", node.lineno


def _graph() -> dict[str, set[str]]:
    modules = _product_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, _ in _imports(path, name):
            # The deepest product module the import names (a name imported from a package may
            # be a submodule or an attribute of it).
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # Importing a.b.c runs a/__init__ and a/b/__init__ first: those are imports too, and
            # are how a package's face joins a loop that no single line shows.
            while target:
                if target != name and not name.startswith(target + ".") and target in modules:
                    graph[name].add(target)
                target = target.rpartition(".")[0]
    return graph


def test_no_package_imports_a_package_above_it() -> None:
    upward = []
    for name, path in _product_modules().items():
        own = name.split(".")[0]
        for target, line in _imports(path, name):
            other = target.split(".")[0]
            if other not in LAYER_OF or other == own:
                continue
            if LAYER_OF[other] > LAYER_OF[own] or (
                LAYER_OF[other] == LAYER_OF[own] and (own, other) not in SIDEWAYS
            ):
                upward.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert upward == []


# What builds on the product and never ships in it: the tests (their world kit included) and the
# benchmarks. A product module that imported one would work only in a checkout.
NOT_SHIPPED = ("tests", "bench")


def _reaching_out(modules: dict[str, Path]) -> list[str]:
    """`module:line imports target` for every import of the tests or the benchmarks."""
    return [
        f"{name}:{line} imports {target}"
        for name, path in modules.items()
        for target, line in _imports(path, name)
        if target.split(".")[0] in NOT_SHIPPED
    ]


def test_no_package_imports_the_tests_or_the_benchmarks() -> None:
    assert _reaching_out(_product_modules()) == []


def test_an_import_of_the_test_kit_inside_a_function_is_found(tmp_path: Path) -> None:
    source = tmp_path / "run.py"
    source.write_text("def f():\n    from tests.worlds import clocks\n")
    assert _reaching_out({"nachtwacht.demo_night.run": source}) == [
        "nachtwacht.demo_night.run:2 imports tests.worlds",
        "nachtwacht.demo_night.run:2 imports tests.worlds.clocks",
    ]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert _cycles(_graph()) == []


def _folder(module: str, program: str) -> str | None:
    """The program's folder (or top-level module) a module belongs to."""
    parts = module.split(".")
    return parts[1] if parts[0] == program and len(parts) > 1 else None


def folder_graph(graph: dict[str, set[str]], program: str = "control_plane") -> dict[str, set[str]]:
    """The module graph seen from one program's folders: one node per folder (a module directly
    in the program's package is a node of its own), an arrow where any module imports another
    folder's."""
    folders: dict[str, set[str]] = {}
    for module, targets in graph.items():
        own = _folder(module, program)
        if own is None:
            continue
        arrows = folders.setdefault(own, set())
        arrows.update(
            other for target in targets if (other := _folder(target, program)) not in (None, own)
        )
    return folders


@pytest.mark.parametrize("program", ["control_plane", "agent_daemon"])
def test_each_programs_folders_import_each_other_one_way(program: str) -> None:
    """Folders in a circle cannot be read, tested or replaced one at a time. In the control
    plane the routes live in `api/` above the domains, and the domains import each other only
    downward; in the agent `disk/` is below `connection/`, which is below `host/`, below the
    updater and the minute."""
    assert _cycles(folder_graph(_graph(), program)) == []


def test_the_folder_graph_sees_a_circle_through_submodules() -> None:
    graph = {
        "control_plane.runs.routes": {"control_plane.api.deps"},
        "control_plane.api.deps": set(),
        "control_plane.api.app": {"control_plane.runs.routes"},
        "control_plane.runs.views": set(),
    }
    assert _cycles(folder_graph(graph)) == [["api", "runs"]]


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        pytest.param({"a": {"b"}, "b": {"a"}}, [["a", "b"]], id="two_modules"),
        pytest.param({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]], id="three_modules"),
        pytest.param({"a": {"b"}, "b": set()}, [], id="a_line_is_no_circle"),
    ],
)
def test_the_circle_finder_finds_circles(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert _cycles(graph) == expected


def test_an_import_inside_a_function_is_read(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from control_plane.reconcile import services\n")
    assert ("control_plane.reconcile", 2) in list(_imports(source, "control_plane.services"))
