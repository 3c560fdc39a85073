"""Keep what the daemon never runs out of its memory (issue 16: idle peak RSS ≤ 40 MiB).

httpx's package imports its command-line tool (`httpx._main`) whenever `click` and `rich` happen to
be installed — on a developer's machine, or a host where another program brought them — and that
tool alone holds ~10 MiB of the daemon's memory for a lifetime of never being called. A stand-in
module takes its place before httpx is first imported; httpx's own fallback for a missing tool is
the same shape (a `main` that cannot run the tool). Nothing else of httpx changes.

httpx imports the `idna` package at import (its tables are ~0.45 MiB of the daemon's memory), for
host names outside ASCII — a URL's host when encoding it, and a `xn--` host when showing it. The
agent's control plane and artifact hosts are ASCII names or addresses, for which httpx never asks
it. `import_httpx` imports httpx with a deferred stand-in for `idna` (below), which imports the
real package the first time httpx uses it; `idna` itself is never replaced for anyone else.

httpcore imports `anyio` for its asynchronous half (its async locks and its anyio network back
end), which the daemon's synchronous clients never run; anyio 4 builds its lazy import map by
parsing its own source at import. `import_httpx` defers it the same way, and imports httpcore
with httpx (httpx would import it with its first transport, which every agent command that talks
to the control plane makes): the stand-in imports the real anyio the first time something
asynchronous uses it: 0.1 MiB less for the idle daemon over ten product hours
(docs/agent_daemon.md).

APScheduler 3 imports, for executors and checks the agent never uses, `asyncio` (for
`iscoroutinefunction`, asked only by its asyncio and tornado executors), `concurrent.futures
.process` with `multiprocessing` (for its process-pool executor) and `tzlocal` (for the local
zone of a scheduler given none): ~3 MiB together, none of it touched by the daemon's thread-pool
minute. `apscheduler_without_unused_imports` imports APScheduler with deferred stand-ins for
those modules: each stand-in carries the names APScheduler takes from it at import, and hands
every other attribute to the real module, imported on first use. When the block ends the
stand-ins leave `sys.modules`, so whoever imports one of those modules later gets the real one.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterator
from concurrent.futures import BrokenExecutor
from contextlib import contextmanager
from typing import Any

__all__ = [
    "DeferredModule",
    "apscheduler_without_unused_imports",
    "import_httpx",
]


def _httpx_cli_not_installed() -> None:
    raise SystemExit("the httpx command-line tool is not available inside the nachtwacht agent")


def _keep_httpx_cli_out() -> None:
    """Install the stand-in before httpx is imported, unless its tool already is: a module
    already in use is never replaced."""
    if "httpx._main" in sys.modules:
        return
    stand_in = types.ModuleType("httpx._main", "httpx's command-line tool, left out by nachtwacht")
    stand_in.main = _httpx_cli_not_installed  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = stand_in


class DeferredModule(types.ModuleType):
    """Stands in for module `name` until something uses it: an attribute not set on the stand-in
    is read from the real module, which is imported then (with the stand-in out of the way)."""

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            # Asked by the import machinery and by introspection; answering them would import.
            raise AttributeError(attribute)
        return getattr(_real_module(self.__name__, self), attribute)


def _real_module(name: str, stand_in: types.ModuleType) -> types.ModuleType:
    if sys.modules.get(name) is stand_in:
        del sys.modules[name]
    return importlib.import_module(name)


def _deferred_function(stand_in: DeferredModule, name: str) -> Callable[..., Any]:
    """A function that imports the real module on its first call and calls its `name`."""
    module = stand_in.__name__

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(_real_module(module, stand_in), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"`{module}.{name}`, imported on first use (agent_daemon.lean_imports)."
    setattr(stand_in, name, call)
    return call


@contextmanager
def _standing_in(stand_ins: dict[str, DeferredModule]) -> Iterator[None]:
    """Imports inside the block find the stand-ins; a module already imported is left as it is
    (then there is nothing to save). The stand-ins leave `sys.modules` when the block ends."""
    installed = {name: stand_in for name, stand_in in stand_ins.items() if name not in sys.modules}
    sys.modules.update(installed)
    try:
        yield
    finally:
        for name, stand_in in installed.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]


def import_httpx() -> None:
    """Import httpx without its command-line tool and with `idna` and `anyio` deferred, unless
    httpx is already imported (then it is too late to save anything)."""
    if "httpx" in sys.modules:
        return
    _keep_httpx_cli_out()
    # httpx: `import idna` in `_urlparse` and `_urls`; it reads `idna.encode`, `idna.decode` and
    # `idna.IDNAError` only when a host is not ASCII (or is punycode), each from the real package.
    # httpcore: `import anyio` in `_synchronization` and `_backends.anyio` (both with postponed
    # annotations); their async classes read `anyio.Lock`, `anyio.fail_after`, … when they run.
    with _standing_in({"idna": DeferredModule("idna"), "anyio": DeferredModule("anyio")}):
        importlib.import_module("httpx")
        if "httpcore" not in sys.modules:
            importlib.import_module("httpcore")


def _scheduler_stand_ins() -> dict[str, DeferredModule]:
    asyncio = DeferredModule("asyncio")
    # apscheduler.util: `from asyncio import iscoroutinefunction`.
    _deferred_function(asyncio, "iscoroutinefunction")
    process = DeferredModule("concurrent.futures.process")
    # apscheduler.executors.pool: `from concurrent.futures.process import BrokenProcessPool`,
    # caught only around its process pool (which the agent never builds). BrokenProcessPool's
    # base class: every failure the real one names is caught the same.
    process.BrokenProcessPool = BrokenExecutor  # type: ignore[attr-defined]
    tzlocal = DeferredModule("tzlocal")
    # apscheduler.schedulers.base: `from tzlocal import get_localzone`, called only for a
    # scheduler given no time zone.
    _deferred_function(tzlocal, "get_localzone")
    return {
        "asyncio": asyncio,
        "concurrent.futures.process": process,
        "multiprocessing": DeferredModule("multiprocessing"),
        "tzlocal": tzlocal,
    }


@contextmanager
def apscheduler_without_unused_imports() -> Iterator[None]:
    """APScheduler's imports inside the block find the deferred stand-ins; a module already
    imported is left as it is (then there is nothing to save)."""
    with _standing_in(_scheduler_stand_ins()):
        yield
