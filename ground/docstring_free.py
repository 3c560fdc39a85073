"""Imports without docstrings, for a program that runs for months: the agent's daemon.

An idle `nachtwacht agent run` holds ~420 modules, and their docstrings are ~1.4 MiB of its
~40 MiB (docs/agent_daemon.md, "Footprint"): text nobody reads in a service. Python's own way to
drop them, `-OO`, also drops every `assert` (the daemon's invariants, and those of the libraries it
runs, which are tested with theirs on) and needs `.opt-2.pyc` files that pip does not write. This
drops the docstrings alone, as modules are loaded:

- a function's docstring is its code's first constant, which the compiler reserves for it (`None`
  when there is none); the loader sets it to `None` in every `def` of the module before the module
  runs, so no function object ever holds the text — unless the code also reads that constant
  (equal constants are stored once: in `def f(): "x"; return "x"` the docstring is the result);
- a module's and a class's docstring is an ordinary assignment to `__doc__` in its body; once the
  module has run, the module's and its classes' `__doc__` are set to `None` (after the classes
  were made: `dataclasses` would otherwise make a docstring of its own for each).

What changes is only `__doc__`: bytecode, constants, line numbers and tracebacks are as before.
The rule about the first constant is checked on the running Python before anything is changed (a
compiled probe): where it does not hold — CPython 3.14 stores a function's docstring by a flag —
nothing is installed and the modules keep their docstrings.

Only source modules found on `sys.path` by Python's own path finder go through this (the venv's
and the standard library's); built-in, frozen and extension modules are left as they are.
"""

from __future__ import annotations

import contextlib
import opcode
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, PathFinder, SourceFileLoader
from types import CodeType, ModuleType

__all__ = ["drop_docstrings_from_imports", "strip_function_docstrings"]

# inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS: a function's code (a module's or a class body's has
# neither). Written out: `inspect` (like `typing`) is one of the modules this is meant to load lean.
_FUNCTION_FLAGS = 0x1 | 0x2


def _has_docstring_slot(code: CodeType) -> bool:
    # A `def` has an identifier for a name; the code the compiler makes of its own (a lambda, a
    # comprehension, a module) is named in angle brackets, and its first constant may be any
    # string the code uses.
    return code.co_flags & _FUNCTION_FLAGS == _FUNCTION_FLAGS and not code.co_name.startswith("<")


# The instructions that read `co_consts` by index (LOAD_CONST, and KW_NAMES or RETURN_CONST where
# the running Python has them), as the two bytes of an instruction that reads index 0.
_READS_FIRST_CONSTANT = tuple(bytes([op, 0]) for op in opcode.hasconst)


def _reads_first_constant(code: CodeType) -> bool:
    # The compiler keeps one copy of equal constants: in `def f(): "x"; return "x"` the docstring is
    # also the returned value, and must stay. (An argument of 0 after EXTENDED_ARG is a larger
    # index; an odd offset is not an instruction.)
    raw = code.co_code
    for pattern in _READS_FIRST_CONSTANT:
        at = raw.find(pattern)
        while at != -1:
            if at % 2 == 0 and not (at >= 2 and raw[at - 2] == opcode.EXTENDED_ARG):
                return True
            at = raw.find(pattern, at + 1)
    return False


def strip_function_docstrings(code: CodeType) -> CodeType:
    """`code` with the docstring of every `def` inside it (at any depth) replaced by `None`; the
    same object when there was none. A docstring that is also a constant the code uses is kept."""
    consts = code.co_consts
    changed: list[object] | None = None
    for index, const in enumerate(consts):
        if type(const) is CodeType:
            stripped = strip_function_docstrings(const)
            if stripped is not const:
                changed = changed or list(consts)
                changed[index] = stripped
    if (
        _has_docstring_slot(code)
        and consts
        and type(consts[0]) is str
        and not _reads_first_constant(code)
    ):
        changed = changed or list(consts)
        changed[0] = None
    return code if changed is None else code.replace(co_consts=tuple(changed))


def _drop_module_and_class_docstrings(module: ModuleType) -> None:
    if isinstance(module.__dict__.get("__doc__"), str):
        module.__doc__ = None
    for value in list(module.__dict__.values()):
        if (
            isinstance(value, type)
            and value.__module__ == module.__name__
            and isinstance(value.__dict__.get("__doc__"), str)
        ):
            # A C type re-exported by its Python module (datetime's) keeps its own.
            with contextlib.suppress(TypeError, AttributeError):
                value.__doc__ = None


class _DocstringFreeLoader(SourceFileLoader):
    def get_code(self, fullname: str) -> CodeType | None:
        code = super().get_code(fullname)
        return None if code is None else strip_function_docstrings(code)

    def exec_module(self, module: ModuleType) -> None:
        super().exec_module(module)
        _drop_module_and_class_docstrings(module)


class _DocstringFreeFinder:
    """Python's path finder, its source loaders swapped for the docstring-free one. Not a
    subclass: `importlib.metadata` asks every finder on `sys.meta_path` for distributions, and an
    inherited `find_distributions` would list each installed package twice."""

    @staticmethod
    def find_spec(
        fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is not None and type(spec.loader) is SourceFileLoader and spec.origin:
            spec.loader = _DocstringFreeLoader(fullname, spec.origin)
        return spec


_PROBE = '''
def documented():
    """the docstring"""
    return "a constant"

def undocumented():
    return "a constant"
'''


def _first_constant_is_the_docstring() -> bool:
    probe = compile(_PROBE, "<docstring probe>", "exec")
    documented, undocumented = (c for c in probe.co_consts if type(c) is CodeType)
    return (
        documented.co_consts[0] == "the docstring"
        and undocumented.co_consts[0] is None
        and _has_docstring_slot(documented)
    )


def drop_docstrings_from_imports() -> bool:
    """From now on, modules this process imports from source come without docstrings. Returns
    whether that is so (False where the running Python keeps docstrings differently); idempotent.
    """
    if any(finder is _DocstringFreeFinder for finder in sys.meta_path):
        return True
    if not _first_constant_is_the_docstring():
        return False
    try:
        where = sys.meta_path.index(PathFinder)
    except ValueError:
        return False
    sys.meta_path.insert(where, _DocstringFreeFinder)
    return True
