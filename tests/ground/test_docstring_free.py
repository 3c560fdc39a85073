"""Imports without docstrings (ground/docstring_free.py): only `__doc__` changes — every constant,
result and line number is as before — and only in the agent's daemon.

The import hook itself is installed in fresh interpreters (a subprocess each), never in the test
process: its `sys.meta_path` stays as it was.
"""

from __future__ import annotations

import asyncio
import opcode
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path
from types import CodeType

import pytest

from ground import docstring_free
from ground.docstring_free import strip_function_docstrings
from tests.worlds.processes import REPO_ROOT

SOURCE = '''
"""The module's docstring."""


def documented(x):
    """A function's docstring."""
    return "result " + x


def undocumented(x):
    return "first constant " + x


def with_a_comprehension(words):
    """Docstring."""
    return [w + "!" for w in words] + list(w + "?" for w in words)


def with_a_lambda():
    """Docstring."""
    return (lambda: "from a lambda")()


def nested():
    """Outer."""

    def inner():
        """Inner."""
        return "inner's constant"

    return inner


class Documented:
    """A class's docstring."""

    def method(self):
        """A method's docstring."""
        return "method's constant"

    @property
    def value(self):
        """A property's docstring."""
        return "property's constant"


async def coroutine():
    """A coroutine's docstring."""
    return "awaited"


def generator():
    """A generator's docstring."""
    yield "yielded"


def fails():
    """Docstring."""
    raise ValueError("on this line")
'''


def _run(code: CodeType) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "probe"}
    exec(code, namespace)  # noqa: S102 - the test's own source, compiled above
    return namespace


def _results(ns: dict[str, object]) -> list[object]:
    documented, undocumented = ns["documented"], ns["undocumented"]
    documented_class = ns["Documented"]
    instance = documented_class()  # type: ignore[operator]
    return [
        documented("x"),  # type: ignore[operator]
        undocumented("y"),  # type: ignore[operator]
        ns["with_a_comprehension"](["a", "b"]),  # type: ignore[operator]
        ns["with_a_lambda"](),  # type: ignore[operator]
        ns["nested"]()(),  # type: ignore[operator]
        instance.method(),
        instance.value,
        asyncio.run(ns["coroutine"]()),  # type: ignore[operator]
        list(ns["generator"]()),  # type: ignore[operator]
    ]


def _failing_position(ns: dict[str, object]) -> tuple[int | None, int | None, int | None]:
    try:
        ns["fails"]()  # type: ignore[operator]
    except ValueError as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return frame.lineno, frame.colno, frame.end_colno
    raise AssertionError("fails() did not raise")


def test_every_def_loses_its_docstring_and_nothing_else() -> None:
    code = compile(SOURCE, "probe.py", "exec")
    before, after = _run(code), _run(strip_function_docstrings(code))

    assert _results(after) == _results(before)
    assert _results(after)[2] == ["a!", "b!", "a?", "b?"]  # comprehensions keep their constants
    for name in ("documented", "with_a_comprehension", "nested", "coroutine", "generator"):
        assert before[name].__doc__  # type: ignore[attr-defined]
        assert after[name].__doc__ is None, name  # type: ignore[attr-defined]
    assert after["nested"]().__doc__ is None  # type: ignore[operator]
    assert after["Documented"].method.__doc__ is None  # type: ignore[attr-defined]
    assert after["Documented"].value.__doc__ is None  # type: ignore[attr-defined]
    assert after["undocumented"].__doc__ is None  # type: ignore[attr-defined]
    # The line table is untouched: a traceback points at the same line and columns.
    raise_line = SOURCE.splitlines().index('    raise ValueError("on this line")') + 1
    assert _failing_position(after) == _failing_position(before)
    assert _failing_position(after)[0] == raise_line


def test_code_without_docstrings_comes_back_as_the_same_object() -> None:
    code = compile("def f():\n    return 'a constant'\nx = [s + '!' for s in 'ab']\n", "m", "exec")
    assert strip_function_docstrings(code) is code


def test_a_comprehension_whose_first_constant_is_a_string_keeps_it() -> None:
    # The guard on compiler-made code: a comprehension has no docstring slot, so its first
    # constant is whatever string it uses first.
    code = compile("def f(words):\n    return [w + '!' for w in words]\n", "m", "exec")
    ns = _run(strip_function_docstrings(code))
    assert ns["f"](["a"]) == ["a!"]  # type: ignore[operator]


def test_a_docstring_that_is_also_a_constant_the_function_uses_is_kept() -> None:
    # Equal constants are stored once: here the docstring is also the returned value.
    source = (
        'def f():\n    """same"""\n    return "same"\n\ndef g():\n    """same"""\n    return 1\n'
    )
    ns = _run(strip_function_docstrings(compile(source, "m", "exec")))
    assert ns["f"]() == "same"  # type: ignore[operator]
    assert ns["f"].__doc__ == "same"  # type: ignore[attr-defined]
    assert ns["g"].__doc__ is None  # type: ignore[attr-defined]


def test_an_index_after_extended_arg_is_not_the_first_constant() -> None:
    # 300 constants: the one at index 256 is loaded as EXTENDED_ARG 1, LOAD_CONST 0.
    body = "".join(f"    x{i} = {i + 1000}\n" for i in range(300))
    source = f'def f():\n    """doc"""\n{body}    return x255\n'
    code = compile(source, "m", "exec")
    function = next(c for c in code.co_consts if isinstance(c, CodeType))
    assert bytes([opcode.EXTENDED_ARG, 1, opcode.opmap["LOAD_CONST"], 0]) in function.co_code
    ns = _run(strip_function_docstrings(code))
    assert ns["f"].__doc__ is None  # type: ignore[attr-defined]
    assert ns["f"]() == 1255  # type: ignore[operator]


def test_an_argument_byte_is_not_an_instruction() -> None:
    # The 51st global is loaded as LOAD_GLOBAL 100 followed by its (zero) cache entries: the bytes
    # of "LOAD_CONST 0" at an odd offset, inside two instructions, not one.
    names = ", ".join(f"g{i}" for i in range(51))
    source = f'def f():\n    """doc"""\n    return ({names})\n'
    code = compile(source, "m", "exec")
    function = next(c for c in code.co_consts if isinstance(c, CodeType))
    load_const_0 = bytes([opcode.opmap["LOAD_CONST"], 0])
    at = function.co_code.find(load_const_0)
    assert at % 2 == 1
    ns = _run(strip_function_docstrings(code))
    ns.update({f"g{i}": i for i in range(51)})
    assert ns["f"].__doc__ is None  # type: ignore[attr-defined]
    assert ns["f"]() == tuple(range(51))  # type: ignore[operator]


def _python(script: str, *, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{cwd}:{REPO_ROOT}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def package(tmp_path: Path) -> Path:
    folder = tmp_path / "docpkg"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""The package."""\n')
    (folder / "things.py").write_text(
        SOURCE
        + textwrap.dedent(
            '''
            import dataclasses
            import enum


            @dataclasses.dataclass
            class Record:
                """A dataclass's docstring."""

                name: str


            class Colour(enum.Enum):
                """An enum's docstring."""

                RED = "red"
            '''
        )
    )
    return tmp_path


def test_an_imported_module_its_classes_and_functions_have_no_docstrings(package: Path) -> None:
    out = _python(
        """
        import sys
        from ground.docstring_free import drop_docstrings_from_imports
        assert drop_docstrings_from_imports()
        from docpkg import things
        import docpkg
        print([
            docpkg.__doc__, things.__doc__, things.documented.__doc__,
            things.Documented.__doc__, things.Documented.method.__doc__,
            things.Record.__doc__, things.Colour.__doc__,
            things.documented("x"), things.Record("n").name, things.Colour("red").name,
        ])
        # datetime re-exports C types under its own name: their docstrings cannot be set and
        # are left, the import still works.
        import datetime as d
        print(d.__doc__, bool(d.datetime.__doc__), d.datetime(2026, 12, 2).year)
        """,
        cwd=package,
    )
    first, second = out.splitlines()
    assert first == ("[None, None, None, None, None, None, None, 'result x', 'n', 'RED']")
    assert second == "None True 2026"


def test_the_bytecode_written_to_the_cache_keeps_its_docstrings(package: Path) -> None:
    # A module compiled for the first time under the hook is cached as Python compiled it; the
    # next process without the hook reads its docstrings from that same cache file.
    pycache = package / "docpkg" / "__pycache__"
    assert not pycache.exists()
    _python(
        """
        from ground.docstring_free import drop_docstrings_from_imports
        assert drop_docstrings_from_imports()
        import docpkg.things
        assert docpkg.things.documented.__doc__ is None
        """,
        cwd=package,
    )
    assert list(pycache.glob("things.*.pyc"))
    out = _python(
        "import docpkg.things as t; print(t.__doc__, '|', t.documented.__doc__)", cwd=package
    )
    assert out.strip() == "The module's docstring. | A function's docstring."


def test_where_the_rule_does_not_hold_nothing_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a Python that keeps a function's docstring elsewhere (3.14: a flag, and the first
    # constant of an undocumented function is then an ordinary one), stripping the first constant
    # would change what the code returns: the hook stays out.
    # Here the probe's "undocumented" function is given a first string constant of its own.
    monkeypatch.setattr(
        docstring_free,
        "_PROBE",
        "def documented():\n    'the docstring'\ndef undocumented():\n    'a constant'\n",
    )
    finders = list(sys.meta_path)
    assert docstring_free.drop_docstrings_from_imports() is False
    assert sys.meta_path == finders


def test_the_probe_holds_on_this_python() -> None:
    assert docstring_free._first_constant_is_the_docstring()


def test_installing_twice_adds_one_finder(package: Path) -> None:
    out = _python(
        """
        import sys
        from ground.docstring_free import drop_docstrings_from_imports
        assert drop_docstrings_from_imports() and drop_docstrings_from_imports()
        print(sum(type(f).__name__ == "type" and f.__name__ == "_DocstringFreeFinder"
                  for f in sys.meta_path))
        """,
        cwd=package,
    )
    assert out.strip() == "1"


def test_installed_packages_are_listed_once(package: Path) -> None:
    # importlib.metadata asks every finder on sys.meta_path for distributions.
    out = _python(
        """
        import importlib.metadata as metadata
        before = sorted(d.metadata["Name"] for d in metadata.distributions())
        from ground.docstring_free import drop_docstrings_from_imports
        assert drop_docstrings_from_imports()
        after = sorted(d.metadata["Name"] for d in metadata.distributions())
        print(len(before), after == before)
        """,
        cwd=package,
    )
    count, same = out.split()
    assert int(count) > 0
    assert same == "True"


@pytest.mark.parametrize(
    ("argv", "stripped"),
    [(["agent", "run"], True), (["agent", "status"], False)],
)
def test_only_the_agent_daemon_imports_without_docstrings(
    tmp_path: Path, argv: list[str], stripped: bool
) -> None:
    # Both commands stop at once on a state directory without a config; what they imported by
    # then shows whether the hook was on.
    out = _python(
        f"""
        from nachtwacht.cli import main
        assert main({argv!r} + ["--state-dir", {str(tmp_path)!r}]) == 2
        import agent_daemon, ground.clock
        print(agent_daemon.__doc__ is None, ground.clock.ClockConfigError.__doc__ is None)
        """,
        cwd=tmp_path,
    )
    assert out.strip() == f"{stripped} {stripped}"
